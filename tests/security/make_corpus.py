#!/usr/bin/python3
"""Writes the attack corpus of the security suite into
tests/security/corpus/: one raw HTTP/1.1 request per file (sent as it is,
on its own connection) and expected.json, the outcome each must have:
the status, text the reply must contain, and optionally a bound on the
reply's size. tests/integration/test_security_bounds.py replays them all
against one nereid under the memory watchdog (security_helpers.py).

Each request is an attack that a Triton release fixed or that issue 53
found (the "why" of each entry names it). Bombs are sent compressed, so
the files stay small. Run with Debian's python from anywhere."""
import gzip, json, os, zlib

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")
MIB = 1024 * 1024
LIMIT = 64 * MIB  # --http-max-input-size's default, as Triton's


def req(path, body=b"", headers=(), method="POST", length=True):
    h = [f"{method} {path} HTTP/1.1", "Host: localhost", "Connection: close"] + list(headers)
    if length:
        h.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(h) + "\r\n\r\n").encode() + body


def infer(model, doc, headers=()):
    return req(f"/v2/models/{model}/infer", json.dumps(doc).encode(), ["Content-Type: application/json", *headers])


def fp32(shape, data=None):
    return {"name": "INPUT0", "shape": shape, "datatype": "FP32", "data": data if data is not None else [1, 2]}


def main():
    cases = {}

    def add(name, data, status, contains, why, **extra):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        cases[name] = {"status": status, "contains": contains, "why": why, **extra}

    ok_body = json.dumps({"inputs": [fp32([1, 4], [1, 2, 3, 4])]}).encode()

    # Compressed bodies inflate to at most --http-max-input-size (server cd0e3a676).
    bomb = b" " * (LIMIT + MIB)
    add("gzip_bomb", req("/v2/models/identity_fp32/infer", gzip.compress(bomb, 9, mtime=0),
                         ["Content-Encoding: gzip"]), 400,
        "Decompressed data size exceeds the maximum allowed value of 67108864 bytes.",
        "server cd0e3a676: a 65 KB gzip body inflating to 65 MiB")
    add("deflate_bomb", req("/v2/models/identity_fp32/infer", zlib.compress(bomb, 9),
                            ["Content-Encoding: deflate"]), 400,
        "Decompressed data size exceeds the maximum allowed value of 67108864 bytes.",
        "server cd0e3a676, deflate")
    add("gzip_corrupt", req("/v2/models/identity_fp32/infer", b"\x1f\x8b\x08\x00garbage" * 50,
                            ["Content-Encoding: gzip"]), 400, "gzip", "server 669cef083: a failed compressed request")
    add("gzip_truncated", req("/v2/models/identity_fp32/infer", gzip.compress(ok_body, mtime=0)[:-12],
                              ["Content-Encoding: gzip"]), 400, "truncated", "server 669cef083")

    # Chunk count (server 13480cbf3): 65537 one-byte chunks.
    head = (b"POST /v2/models/identity_fp32/infer HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    add("chunks_65537", head + b"1\r\n \r\n" * 65537 + b"0\r\n\r\n", 400,
        "Chunked request body exceeds maximum of 65536 non-empty chunks. Send fewer or larger HTTP chunks.",
        "server 13480cbf3")
    padded = ok_body + b" " * (65536 - len(ok_body))
    add("chunks_65536", head + b"".join(b"1\r\n%c\r\n" % c for c in padded) + b"0\r\n\r\n", 200, "OUTPUT0",
        "server 13480cbf3: exactly the cap is served")

    # Body size and Content-Length (server 2d64d2deb, d5515db58). Triton
    # r25.07 limits each input's data; Nereid also bounds the body, at four
    # times --http-max-input-size, refused from the header (docs/http.md).
    add("content_length_huge", req("/v2/models/identity_fp32/infer", headers=["Content-Length: 99999999999999999999"],
                                   length=False), 400,
        f"request body of 18446744073709551615 bytes exceeds the body limit of {4 * LIMIT} bytes "
        "(4 x --http-max-input-size).",
        "server d5515db58; Nereid's body bound")
    add("content_length_over", req("/v2/models/identity_fp32/infer", headers=[f"Content-Length: {4 * LIMIT + 1}"],
                                   length=False), 400,
        f"request body of {4 * LIMIT + 1} bytes exceeds the body limit of {4 * LIMIT} bytes "
        "(4 x --http-max-input-size).",
        "Nereid's body bound: refused from the header, nothing read")
    add("content_length_garbage", req("/v2/models/identity_fp32/infer", ok_body, ["Content-Length: 12abc"],
                                      length=False), 400, "Content-Length", "server 2d64d2deb (atoi)")

    # Inference-Header-Content-Length as std::stoi reads it (server 10f2a691a, 2d64d2deb).
    ihcl = "Inference-Header-Content-Length"
    add("ihcl_out_of_range", req("/v2/models/identity_fp32/infer", ok_body, [f"{ihcl}: 99999999999"]), 400,
        f"Unable to parse {ihcl}, value is out of range [ -2147483648, 2147483647 ], got: 99999999999",
        "server 10f2a691a")
    add("ihcl_garbage", req("/v2/models/identity_fp32/infer", ok_body, [f"{ihcl}: abc"]), 400,
        f"Unable to parse {ihcl}, got: abc", "server 2d64d2deb")
    add("ihcl_negative", req("/v2/models/identity_fp32/infer", ok_body, [f"{ihcl}: -1"]), 400,
        "inference header size should be in range (0, ", "server 10f2a691a")

    # JSON depth and the sizes and shapes of JSON inputs.
    add("json_depth_101", req("/v2/models/identity_fp32/infer", b"[" * 101 + b"]" * 101),
        400, "JSON nesting depth exceeds maximum allowed limit (100)", "server 0be87c0f7 (depth)")
    add("json_data_depth_101", req("/v2/models/identity_fp32/infer",
                                   b'{"inputs":[{"name":"INPUT0","shape":[1,1],"datatype":"FP32","data":' +
                                   b"[" * 101 + b"1" + b"]" * 101 + b"}]}"),
        400, "JSON nesting depth exceeds maximum allowed limit (100)", "server 0be87c0f7: depth of 'data'")
    add("json_depth_huge", req("/v2/models/identity_fp32/infer", gzip.compress(b"[" * 1000000, 9, mtime=0),
                               ["Content-Encoding: gzip"]), 400,
        "JSON nesting depth exceeds maximum allowed limit (100)", "a million brackets: no recursion that deep")
    add("shape_count_overflow", infer("identity_fp32", {"inputs": [fp32([4294967296, 4294967296, 8])]}), 400,
        "invalid shape for input 'INPUT0': shape [4294967296,4294967296,8] causes total element count to exceed "
        "maximum size of 9223372036854775807", "server 865432fcb, d074a3b05")
    add("shape_byte_size_overflow", infer("identity_fp32", {"inputs": [fp32([1, 4611686018427387904])]}), 400,
        "byte size overflow for input 'INPUT0': element count (4611686018427387904) * data type size (4) exceeds "
        "maximum allowed size (9223372036854775807)", "server e5aecb323")
    add("shape_over_input_limit", infer("identity_fp32", {"inputs": [fp32([1, 1 << 40])]}), 400,
        "JSON input 'INPUT0' has a byte_size (4398046511104 bytes) that exceeds the maximum allowed value of "
        "67108864 bytes.", "server e5aecb323, be7d4b1a1")
    add("bytes_more_strings_than_shape",
        infer("identity_bytes", {"inputs": [{"name": "INPUT0", "shape": [1, 2], "datatype": "BYTES",
                                             "data": ["a", "b", "c"]}]}), 400, "INPUT0",
        "server d074a3b05, 865432fcb: BYTES counters")
    add("bytes_fewer_strings_than_shape",
        infer("identity_bytes", {"inputs": [{"name": "INPUT0", "shape": [1, 3], "datatype": "BYTES",
                                             "data": ["a"]}]}), 400, "INPUT0", "server 0be87c0f7")

    # Classification beyond Triton's bound (server 3ef606248): 8 x 125001
    # FP32 zeros, binary, gzip'ed; every element asked for.
    n = 125001
    header = json.dumps({"inputs": [{"name": "INPUT0", "shape": [8, n], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 8 * n * 4}}],
                         "outputs": [{"name": "OUTPUT0", "parameters": {"classification": n}}]}).encode()
    add("classify_too_large",
        req("/v2/models/identity_fp32/infer", gzip.compress(header + bytes(8 * n * 4), 9, mtime=0),
            ["Content-Encoding: gzip", f"{ihcl}: {len(header)}"]), 400,
        "classification output tensor too large", "server 3ef606248")

    # Requested outputs (core e93e4a9) and many names (linear, not quadratic).
    add("duplicate_outputs", infer("identity_fp32", {"inputs": [fp32([1, 4], [1, 2, 3, 4])],
                                                     "outputs": [{"name": "OUTPUT0"}, {"name": "OUTPUT0"}]}), 400,
        "output 'OUTPUT0' already exists in request", "core e93e4a9")
    many = json.dumps({"inputs": [fp32([1, 4], [1, 2, 3, 4])],
                       "outputs": [{"name": f"O{k}"} for k in range(150000)]}).encode()
    add("outputs_150000", req("/v2/models/identity_fp32/infer", gzip.compress(many, 9, mtime=0),
                              ["Content-Encoding: gzip"]), 400, "unexpected inference output 'O0'",
        "150,000 distinct output names: quadratic duplicate checks held a core thread for minutes", max_seconds=5)
    many = json.dumps({"inputs": [{"name": f"I{k}", "shape": [0], "datatype": "FP32",
                                   "parameters": {"binary_data_size": 0}} for k in range(100000)]}).encode()
    add("inputs_100000", req("/v2/models/identity_fp32/infer", gzip.compress(many, 9, mtime=0),
                             ["Content-Encoding: gzip"]), 400, "identity_fp32",
        "100,000 distinct input names", max_seconds=5)
    add("duplicate_inputs", infer("identity_fp32", {"inputs": [fp32([1, 4], [1, 2, 3, 4])] * 2}), 400,
        "input 'INPUT0' already exists in request", "core: duplicate inputs")

    # An error that echoes a 200 KB name is cut (issue 53).
    long_name = json.dumps({"inputs": [{"name": "N" * 200000, "shape": [1, 4], "datatype": "FP32",
                                        "data": [1, 2, 3, 4]}]}).encode()
    add("echo_long_input_name", req("/v2/models/identity_fp32/infer", gzip.compress(long_name, 9, mtime=0),
                                    ["Content-Encoding: gzip"]),
        400, "NNNN...\"}", "issue 53: error bodies carry at most 4 KiB of a message", max_body=4200)

    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(cases, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
