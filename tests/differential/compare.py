"""What the differential tests call "the same answer": responses parsed and
normalised, then compared field by field.

Normalised away: key order, durations and timestamps (any key ending in
"_ns", "ns" or named "last_inference"), float noise (6 significant digits).
Error messages: ours must START with Triton's sentence (we may add our
file:line and field after it). Everything else must be equal.
"""
import json
import struct

TIME_KEYS = ("last_inference",)


def normalise(value, key=""):
    if isinstance(value, dict):
        return {k: normalise(v, k) for k, v in sorted(value.items())}
    if isinstance(value, list):
        items = [normalise(v, key) for v in value]
        # Clients find outputs by name; Triton's order of an ensemble's
        # outputs is its map's, not the request's or the configuration's.
        if key == "outputs" and all(isinstance(v, dict) and "name" in v for v in items):
            items.sort(key=lambda v: v["name"])
        return items
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if key.endswith("ns") or key in TIME_KEYS:
        return 0
    if isinstance(value, float):
        return float(f"{value:.6g}")
    return value


def split_binary(body, header_len):
    """A binary-extension body: (its JSON header, the raw tail)."""
    return body[:header_len], body[header_len:]


def parse_http(status, headers, body):
    """An HTTP answer as a comparable dict: status, the headers clients
    read, and the body (JSON parsed and normalised, binary tails kept)."""
    out = {"status": status}
    ctype = headers.get("content-type", "")
    hlen = headers.get("inference-header-content-length")
    out["binary"] = hlen is not None
    tail = b""
    if hlen is not None:
        try:
            body, tail = split_binary(body, int(hlen))
        except ValueError:
            out["bad_header_length"] = hlen
    try:
        out["json"] = normalise(json.loads(body)) if body else None
    except ValueError:
        out["text"] = body.decode(errors="replace")
        out["content_type"] = ctype.split(";")[0].strip().lower()
    if tail:
        out["tail"] = tail.hex()
    return out


def differences(triton, nereid, path="$"):
    """The list of (path, triton's, ours) where the answers differ."""
    if isinstance(triton, dict) and isinstance(nereid, dict):
        diffs = []
        for k in sorted(set(triton) | set(nereid)):
            if k not in nereid:
                diffs.append((f"{path}.{k}", triton[k], "<missing>"))
            elif k not in triton:
                diffs.append((f"{path}.{k}", "<missing>", nereid[k]))
            elif k == "error" and isinstance(triton[k], str) and isinstance(nereid[k], str):
                if not nereid[k].startswith(triton[k]):
                    diffs.append((f"{path}.error", triton[k], nereid[k]))
            else:
                diffs.extend(differences(triton[k], nereid[k], f"{path}.{k}"))
        return diffs
    if isinstance(triton, list) and isinstance(nereid, list):
        if len(triton) != len(nereid):
            return [(f"{path}[len]", len(triton), len(nereid))]
        diffs = []
        for i, (a, b) in enumerate(zip(triton, nereid)):
            diffs.extend(differences(a, b, f"{path}[{i}]"))
        return diffs
    return [] if triton == nereid else [(path, triton, nereid)]


def bytes_tensor(strings):
    """BYTES elements as the binary extension lays them out."""
    return b"".join(struct.pack("<I", len(s)) + s for s in strings)
