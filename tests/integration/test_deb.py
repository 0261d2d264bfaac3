"""The Debian package (cmake/install.cmake, CPack): built from this build
tree into a temporary folder; its name, contents, conffiles and systemd
unit checked; its Depends checked against what its ELF files need; then
unpacked into a temporary root (dpkg-deb -x) and the server run from there
with the flags of its /etc/default/nereid.

Environment: NRD_BUILD_DIR, CPACK_COMMAND, NEREID_EXAMPLES."""
import os
import re
import shlex
import subprocess

import pytest

from deploy_helpers import BUILD_DIR, EXAMPLES, SOURCE, Server, elf_files, infer_simple, local_ports, run

CPACK = os.environ.get("CPACK_COMMAND", "cpack")


def project_version():
    text = open(os.path.join(SOURCE, "CMakeLists.txt")).read()
    return re.search(r"project\(nereid VERSION (\S+)", text).group(1)


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    out = tmp_path_factory.mktemp("deb")
    run([CPACK, "--config", os.path.join(BUILD_DIR, "CPackConfig.cmake"), "-B", str(out)], cwd=str(out))
    arch = run(["dpkg", "--print-architecture"]).stdout.strip()
    path = out / f"nereid_{project_version()}_{arch}.deb"
    assert path.exists(), sorted(os.listdir(out))
    return path


@pytest.fixture(scope="module")
def root(deb, tmp_path_factory):
    r = tmp_path_factory.mktemp("root")
    run(["dpkg-deb", "-x", str(deb), str(r)])
    return r


def field(deb, name):
    return run(["dpkg-deb", "-f", str(deb), name]).stdout.strip()


def test_control_fields(deb):
    assert field(deb, "Package") == "nereid"
    assert field(deb, "Version") == project_version()
    assert field(deb, "Architecture") == run(["dpkg", "--print-architecture"]).stdout.strip()
    assert field(deb, "Maintainer")
    # Nothing runs at install: no maintainer scripts, so the unit is not enabled.
    control = run(["dpkg-deb", "--info", str(deb)]).stdout
    for script in ("postinst", "preinst", "prerm", "postrm"):
        assert f" {script} " not in control, control
    conffiles = run(["dpkg-deb", "--info", str(deb), "conffiles"]).stdout.split()
    assert conffiles == ["/etc/default/nereid"]


def test_contents(deb):
    listing = run(["dpkg-deb", "-c", str(deb)]).stdout.splitlines()
    paths = {line.split(None, 5)[5] for line in listing}
    for p in ["./opt/nereid/bin/nereid", "./opt/nereid/bin/nrd_perf", "./opt/nereid/lib/libtritonserver.so",
              "./opt/nereid/include/triton/core/tritonserver.h", "./opt/nereid/lib/pkgconfig/nereid.pc",
              "./opt/nereid/lib/cmake/Nereid/NereidConfig.cmake",
              "./opt/nereid/backends/identity/libtriton_identity.so",
              "./lib/systemd/system/nereid.service", "./etc/default/nereid",
              "./usr/bin/nereid -> /opt/nereid/bin/nereid"]:
        assert p in paths, p
    # Everything is under /opt/nereid but the link, the unit and its defaults.
    outside = {p for p in paths if not p.startswith("./opt/") and not p.endswith("/")}
    assert outside == {"./usr/bin/nereid -> /opt/nereid/bin/nereid", "./lib/systemd/system/nereid.service",
                       "./etc/default/nereid"}
    assert not any("test_backends" in p or "/recorder/" in p for p in paths)


def packages_of(sonames):
    """{soname: the installed Debian package holding the library the loader
    finds for it}; sonames no package holds are left out. One ldconfig and
    one dpkg call in all (dpkg -S reads its whole database each time)."""
    paths = {}
    for line in run(["ldconfig", "-p"]).stdout.splitlines():
        m = re.match(r"\s*(\S+) \(([^)]*)\) => (\S+)", line)
        if m and m.group(1) in sonames and "64" in m.group(2) and m.group(1) not in paths:
            real = os.path.realpath(m.group(3))
            # usrmerge: dpkg may know the file under /lib or /usr/lib.
            paths[m.group(1)] = {m.group(3), real, real.replace("/usr/lib/", "/lib/", 1),
                                 real.replace("/lib/", "/usr/lib/", 1)}
    wanted = sorted(set().union(*paths.values())) if paths else []
    owner = {}
    p = subprocess.run(["dpkg", "-S", *wanted], capture_output=True, text=True)
    for line in p.stdout.splitlines():
        pkg, _, path = line.partition(": ")
        owner[path.strip()] = pkg.split(":", 1)[0].strip()
    return {so: next(owner[c] for c in cands if c in owner)
            for so, cands in paths.items() if any(c in owner for c in cands)}


def test_depends_cover_every_needed_library(deb, root):
    depends = {d.split("(")[0].strip() for d in field(deb, "Depends").split(",")}
    assert "libc6" in depends and "libjansson4" in depends, depends
    elves = list(elf_files(root))
    shipped = {os.path.basename(p) for p in elves}
    needed = set()
    for path in elves:
        for line in run(["readelf", "-d", path]).stdout.splitlines():
            m = re.search(r"\(NEEDED\)\s+Shared library: \[(.*)\]", line)
            if m and m.group(1) not in shipped:
                needed.add(m.group(1))
    owners = packages_of(needed)
    for lib in sorted(needed):
        assert lib in owners, f"no installed package has {lib}"
        assert owners[lib] in depends, f"{lib} comes from {owners[lib]}, which Depends ({sorted(depends)}) lacks"


def test_systemd_unit(root):
    unit = (root / "lib/systemd/system/nereid.service").read_text()
    assert "ExecStart=/opt/nereid/bin/nereid $NEREID_ARGS" in unit
    assert "EnvironmentFile=-/etc/default/nereid" in unit
    assert "KillSignal=SIGTERM" in unit
    assert "WantedBy=multi-user.target" in unit


def test_unpacked_server_runs_with_the_default_flags(root, tmp_path):
    defaults = (root / "etc/default/nereid").read_text()
    m = re.search(r'^NEREID_ARGS="(.*)"$', defaults, re.M)
    assert m, defaults
    args = shlex.split(m.group(1))
    # The packaged flags, with the repository the test has.
    assert "--model-repository=/srv/nereid/models" in args
    args = [f"--model-repository={EXAMPLES}" if a.startswith("--model-repository=") else a for a in args]
    s = Server([str(root / "opt/nereid/bin/nereid"), *args, *local_ports()], cwd=str(tmp_path))
    try:
        s.wait_ready()
        infer_simple(s.ports()["http"])
        s.stop_clean()
    finally:
        s.close()
