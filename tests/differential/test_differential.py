"""Triton as the oracle: the same requests to tritonserver 2.51 and to
nereid on one model repository, the answers compared (compare.py). A
difference fails unless docs/differences.md lists it (its section
"Differential suite": a case id glob, a field path glob, the reason).

Environment (ctest sets it): NEREID_BIN, NEREID_BACKEND_DIR; Triton from
.deps/tritonserver (scripts/fetch_pypi.sh) or NRD_TRITON_DIR.
"""
import copy
import fnmatch
import os
import re
import shutil
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import MODELS, SHORT_IDLE_MODEL, all_cases, http_call, shm_close, triton_aborts  # noqa: E402
from compare import differences, parse_http  # noqa: E402
from servers import SOURCE, TRITON, start_pair  # noqa: E402

EXAMPLES = os.path.join(SOURCE, "examples", "models")
DIFFERENCES_DOC = os.path.join(SOURCE, "docs", "differences.md")

if not os.access(TRITON, os.X_OK):  # a missing oracle fails the run, never skips it
    raise RuntimeError(f"no tritonserver at {TRITON!r} (scripts/fetch_pypi.sh installs it)")


def listed_differences():
    """(case glob, path glob, reason) rows of docs/differences.md's
    "Differential suite" section."""
    text = open(DIFFERENCES_DOC).read()
    section = text.split("## Differential suite", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        m = re.match(r"\|\s*`([^`]+)`\s*\|\s*`([^`]+)`\s*\|\s*(.+?)\s*\|\s*$", line)
        if m:
            rows.append((m.group(1), m.group(2), m.group(3)))
    return rows


def is_listed(case_id, path, rows):
    return any(fnmatch.fnmatchcase(case_id, c) and fnmatch.fnmatchcase(path, p) for c, p, _ in rows)


def metric_families(server):
    status, _, body = http_call(server, "GET", "/metrics", port=server.metrics)
    assert status == 200
    fams = {}
    for line in body.decode().splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            fams[m.group(1)] = {"type": m.group(2), "labels": set()}
        elif line and not line.startswith("#"):
            name = re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line).group(0)
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            fam = fams.get(name) or fams.get(base)
            if fam is not None:
                labels = re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="', line)
                fam["labels"].update(l for l in labels if l != "le" and l != "quantile")
    return {k: {"type": v["type"], "labels": sorted(v["labels"])} for k, v in fams.items() if k.startswith("nv_")}


def attempt(send, server):
    """A case's answer, or how the exchange broke (a closed connection is
    an answer too: both servers must give the same one)."""
    try:
        return send(server)
    except Exception as e:  # noqa: BLE001 - any failure is compared
        return {"exception": type(e).__name__}


def make_repo(root):
    """The example repository, and accumulate_onnx again with a sequence
    idle time of 0.3 s (cases.SHORT_IDLE_MODEL), for the sequence timeout
    cases."""
    models = os.path.join(root, "models")
    shutil.copytree(EXAMPLES, models)
    short = os.path.join(models, SHORT_IDLE_MODEL)
    shutil.copytree(os.path.join(EXAMPLES, "accumulate_onnx"), short)
    cfg = open(os.path.join(short, "config.pbtxt")).read()
    cfg = cfg.replace('name: "accumulate_onnx"', f'name: "{SHORT_IDLE_MODEL}"')
    cfg = cfg.replace("max_sequence_idle_microseconds: 60000000", "max_sequence_idle_microseconds: 300000")
    assert SHORT_IDLE_MODEL in cfg and "300000" in cfg, cfg
    with open(os.path.join(short, "config.pbtxt"), "w") as f:
        f.write(cfg)
    return models


@pytest.fixture(scope="module")
def results():
    """Every case sent to both servers: {case id: (triton's, ours)}, and
    then the statistics and metrics both kept of the whole run."""
    repo = tempfile.mkdtemp(prefix="nrd-diff-repo-")
    triton = nereid = work = None
    try:
        triton, nereid, work = start_pair(make_repo(repo))
    except BaseException:
        shutil.rmtree(repo, ignore_errors=True)
        raise
    try:
        out = {}
        for case_id, send in all_cases():
            theirs = {"status": "aborts"} if triton_aborts(case_id) else attempt(send, triton)
            out[case_id] = (theirs, attempt(send, nereid))
        assert triton.proc.poll() is None, f"triton died\n{triton.text()}"
        assert nereid.proc.poll() is None, f"nereid died\n{nereid.text()}"
        for m in MODELS:
            path = f"/v2/models/{m}/stats"
            out[f"stats.{m}"] = (parse_http(*http_call(triton, "GET", path)), parse_http(*http_call(nereid, "GET", path)))
        out["metrics.families"] = ({"families": metric_families(triton)}, {"families": metric_families(nereid)})
        yield out
    finally:
        triton.stop()
        nereid.stop()
        shm_close()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(repo, ignore_errors=True)


def test_no_unlisted_difference(results):
    rows = listed_differences()
    unlisted, listed, used = [], 0, set()
    for case_id, (theirs, ours) in results.items():
        for path, a, b in differences(theirs, ours):
            hit = [r for r in rows if fnmatch.fnmatchcase(case_id, r[0]) and fnmatch.fnmatchcase(path, r[1])]
            if hit:
                listed += 1
                used.update((r[0], r[1]) for r in hit)
            else:
                unlisted.append(f"{case_id} {path}: triton {a!r} | nereid {b!r}")
    print(f"\ndifferential: {len(results)} cases, {listed} listed differences "
          f"({len(used)} of {len(rows)} listings in docs/differences.md used), {len(unlisted)} unlisted")
    report = os.environ.get("NRD_DIFF_REPORT")
    if report:  # every unlisted difference, for working through them
        with open(report, "w") as f:
            f.write("\n".join(unlisted) + "\n")
    stale = [f"{c} {p}" for c, p, _ in rows if (c, p) not in used]
    if stale:
        print("listings that matched nothing this run:\n  " + "\n  ".join(stale))
    assert not unlisted, f"{len(unlisted)} unlisted differences:\n" + "\n".join(unlisted[:200])


def test_what_aborts_triton_is_refused_cleanly(results):
    """The requests Triton 2.51 dies of get an error answer from us, the
    one r25.07 gives (docs/differences.md lists each): the server lives on."""
    for case_id, (theirs, ours) in results.items():
        if theirs == {"status": "aborts"}:
            assert isinstance(ours.get("status"), int) and ours["status"] >= 400, (case_id, ours)
            assert "error" in (ours.get("json") or {}), (case_id, ours)


def test_corpus_is_large(results):
    assert len(results) >= 300, len(results)


def test_an_altered_answer_is_caught(results):
    """The comparison sees a one-value change in an answer that matched:
    the suite would fail on a new difference."""
    rows = listed_differences()
    theirs, ours = results["infer.simple.valid"]
    assert not [d for d in differences(theirs, ours) if not is_listed("infer.simple.valid", d[0], rows)]
    altered = copy.deepcopy(ours)
    altered["json"]["outputs"][0]["data"][3] += 1
    found = differences(theirs, altered)
    assert found and not all(is_listed("infer.simple.valid", p, rows) for p, _, _ in found), found
    # An error message that no longer starts with Triton's sentence too.
    theirs, ours = results["infer.no_such_model"]
    altered = copy.deepcopy(ours)
    altered["json"]["error"] = "x" + altered["json"]["error"]
    assert differences(theirs, altered)
