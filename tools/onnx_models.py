#!/usr/bin/python3
"""Small ONNX models for the onnxruntime backend's examples and tests, built
with Debian's python3-onnx (onnx.helper), so no model file comes from
elsewhere.

    /usr/bin/python3 tools/onnx_models.py <directory> [name ...]

writes <directory>/<name>.onnx for each name (all when none is given).
The models:
  add_sub       INPUT0, INPUT1 FP32 [batch, 4] -> OUTPUT0 = sum, OUTPUT1 = difference
  fixed_add_sub the same on INT32 [4], no batch dimension
  strings       INPUT BYTES [batch, n] -> OUTPUT (the same strings)
  identities    one Identity per datatype: IN_<TYPE> -> OUT_<TYPE>, each [batch, 2]
  accumulate    INPUT INT32 [batch, 1] and STATE_IN INT32 [batch, 1] ->
                OUTPUT = STATE_OUT = STATE_IN + INPUT (a running sum kept as
                implicit state by the sequence batcher)
  scalar        X FP32 [] (a scalar) -> Y = X * 2
  doubler       X FP32 [batch] -> Y = X * 2 (one value per batch row)
  stateful_accumulate_fp32, stateful_accumulate_int32
                for the stateful backend (docs/stateful.md): Input [4, batch, 5],
                ResetSequence BOOL [batch, 1], Accumulate_In [batch, 5] ->
                Accumulate_Out = (ResetSequence ? 0 : Accumulate_In) + the
                Input summed over its segment dimension (the first),
                Output = Input + Accumulate_Out (broadcast over the segments)
  stateful_mixed
                two state pairs of different types, batch dimension first:
                Input_I8 INT8 [batch, 4], Input_Bool BOOL [batch, 4],
                ResetSequence BOOL [batch, 1], State_I32_In INT32 [batch, 4],
                State_F16_In FP16 [batch, 4] -> State_I32_Out = (reset ? 0 :
                State_I32_In) + Input_I8, State_F16_Out = (reset ? 0 :
                State_F16_In) + Input_Bool; Output_I32 and Output_F16 are
                copies of the new states
"""
import os
import sys

import onnx
from onnx import TensorProto, helper

# ONNX Runtime 1.30 reads IR version 8 / opset 17, what Debian's onnx writes.
OPSET = [helper.make_opsetid("", 17)]

TYPES = {
    "BOOL": TensorProto.BOOL, "UINT8": TensorProto.UINT8, "UINT16": TensorProto.UINT16,
    "UINT32": TensorProto.UINT32, "UINT64": TensorProto.UINT64, "INT8": TensorProto.INT8,
    "INT16": TensorProto.INT16, "INT32": TensorProto.INT32, "INT64": TensorProto.INT64,
    "FP16": TensorProto.FLOAT16, "FP32": TensorProto.FLOAT, "FP64": TensorProto.DOUBLE,
    "BF16": TensorProto.BFLOAT16, "BYTES": TensorProto.STRING,
}


def tensor(name, elem, dims):
    return helper.make_tensor_value_info(name, elem, dims)


def model(name, nodes, inputs, outputs):
    graph = helper.make_graph(nodes, name, inputs, outputs)
    m = helper.make_model(graph, opset_imports=OPSET, producer_name="nereid")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def add_sub():
    f = TensorProto.FLOAT
    return model("add_sub",
                 [helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
                  helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"])],
                 [tensor("INPUT0", f, ["batch", 4]), tensor("INPUT1", f, ["batch", 4])],
                 [tensor("OUTPUT0", f, ["batch", 4]), tensor("OUTPUT1", f, ["batch", 4])])


def fixed_add_sub():
    i = TensorProto.INT32
    return model("fixed_add_sub",
                 [helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
                  helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"])],
                 [tensor("INPUT0", i, [4]), tensor("INPUT1", i, [4])],
                 [tensor("OUTPUT0", i, [4]), tensor("OUTPUT1", i, [4])])


def strings():
    s = TensorProto.STRING
    return model("strings", [helper.make_node("Identity", ["INPUT"], ["OUTPUT"])],
                 [tensor("INPUT", s, ["batch", "n"])], [tensor("OUTPUT", s, ["batch", "n"])])


def identities():
    nodes, ins, outs = [], [], []
    for t, elem in TYPES.items():
        nodes.append(helper.make_node("Identity", [f"IN_{t}"], [f"OUT_{t}"]))
        ins.append(tensor(f"IN_{t}", elem, ["batch", 2]))
        outs.append(tensor(f"OUT_{t}", elem, ["batch", 2]))
    return model("identities", nodes, ins, outs)


def accumulate():
    i = TensorProto.INT32
    return model("accumulate",
                 [helper.make_node("Add", ["STATE_IN", "INPUT"], ["OUTPUT"]),
                  helper.make_node("Identity", ["OUTPUT"], ["STATE_OUT"])],
                 [tensor("INPUT", i, ["batch", 1]), tensor("STATE_IN", i, ["batch", 1])],
                 [tensor("OUTPUT", i, ["batch", 1]), tensor("STATE_OUT", i, ["batch", 1])])


def scalar():
    f = TensorProto.FLOAT
    two = helper.make_tensor("two", f, [], [2.0])
    return model("scalar", [helper.make_node("Constant", [], ["C"], value=two),
                            helper.make_node("Mul", ["X", "C"], ["Y"])],
                 [tensor("X", f, [])], [tensor("Y", f, [])])


def doubler():
    f = TensorProto.FLOAT
    two = helper.make_tensor("two", f, [], [2.0])
    return model("doubler", [helper.make_node("Constant", [], ["C"], value=two),
                             helper.make_node("Mul", ["X", "C"], ["Y"])],
                 [tensor("X", f, ["batch"])], [tensor("Y", f, ["batch"])])


def stateful_accumulate(elem, name, seq=4):
    zero = helper.make_tensor("zero", elem, [1, 5], [0] * 5)
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [0])
    return model(name,
                 [helper.make_node("Constant", [], ["Zero"], value=zero),
                  helper.make_node("Constant", [], ["Axes"], value=axes),
                  helper.make_node("ReduceSum", ["Input", "Axes"], ["Segment"], keepdims=0),
                  helper.make_node("Where", ["ResetSequence", "Zero", "Accumulate_In"], ["Previous"]),
                  helper.make_node("Add", ["Previous", "Segment"], ["Accumulate_Out"]),
                  helper.make_node("Add", ["Input", "Accumulate_Out"], ["Output"])],
                 [tensor("Input", elem, [seq, "batch", 5]),
                  tensor("ResetSequence", TensorProto.BOOL, ["batch", 1]),
                  tensor("Accumulate_In", elem, ["batch", 5])],
                 [tensor("Output", elem, [seq, "batch", 5]),
                  tensor("Accumulate_Out", elem, ["batch", 5])])


def stateful_accumulate_fp32():
    return stateful_accumulate(TensorProto.FLOAT, "stateful_accumulate_fp32")


def stateful_accumulate_int32():
    return stateful_accumulate(TensorProto.INT32, "stateful_accumulate_int32")


def stateful_accumulate_symbolic_seq():
    """The Stateful Backend's published layout: [seq, batch, N] with the
    sequence dimension symbolic too (the configuration fixes it)."""
    return stateful_accumulate(TensorProto.FLOAT, "stateful_accumulate_symbolic_seq", seq="seq")


def stateful_mixed():
    i32, f16 = TensorProto.INT32, TensorProto.FLOAT16
    zi = helper.make_tensor("zi", i32, [1, 4], [0] * 4)
    zf = helper.make_tensor("zf", f16, [1, 4], [0] * 4)
    return model("stateful_mixed",
                 [helper.make_node("Constant", [], ["ZeroI"], value=zi),
                  helper.make_node("Constant", [], ["ZeroF"], value=zf),
                  helper.make_node("Cast", ["Input_I8"], ["I8AsI32"], to=i32),
                  helper.make_node("Cast", ["Input_Bool"], ["BoolAsF16"], to=f16),
                  helper.make_node("Where", ["ResetSequence", "ZeroI", "State_I32_In"], ["PrevI"]),
                  helper.make_node("Where", ["ResetSequence", "ZeroF", "State_F16_In"], ["PrevF"]),
                  helper.make_node("Add", ["PrevI", "I8AsI32"], ["State_I32_Out"]),
                  helper.make_node("Add", ["PrevF", "BoolAsF16"], ["State_F16_Out"]),
                  helper.make_node("Identity", ["State_I32_Out"], ["Output_I32"]),
                  helper.make_node("Identity", ["State_F16_Out"], ["Output_F16"])],
                 [tensor("Input_I8", TensorProto.INT8, ["batch", 4]),
                  tensor("Input_Bool", TensorProto.BOOL, ["batch", 4]),
                  tensor("ResetSequence", TensorProto.BOOL, ["batch", 1]),
                  tensor("State_I32_In", i32, ["batch", 4]),
                  tensor("State_F16_In", f16, ["batch", 4])],
                 [tensor("Output_I32", i32, ["batch", 4]), tensor("Output_F16", f16, ["batch", 4]),
                  tensor("State_I32_Out", i32, ["batch", 4]), tensor("State_F16_Out", f16, ["batch", 4])])


def ragged():
    """Ragged batching: INPUT arrives flattened over the batch ([-1]), and
    each batch input kind is returned per request ([batch, 1]) so that a
    client can read what the backend made."""
    f, i, i64 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64

    def const(name, values):
        return helper.make_node("Constant", [], [name], value=helper.make_tensor(name + "_v", i64, [len(values)], values))

    nodes = [
        const("ax1", [1]), const("zero", [0]), const("minus1", [-1]),
        helper.make_node("Unsqueeze", ["COUNT", "ax1"], ["OUT_COUNT"]),
        helper.make_node("Unsqueeze", ["ACC", "ax1"], ["OUT_ACC"]),
        # Each request's start: ACC_ZERO without its last entry.
        helper.make_node("Slice", ["ACC_ZERO", "zero", "minus1"], ["STARTS"]),
        helper.make_node("Unsqueeze", ["STARTS", "ax1"], ["OUT_START"]),
        helper.make_node("Identity", ["ITEM"], ["OUT_ITEM"]),
        helper.make_node("Unsqueeze", ["FLAT", "ax1"], ["OUT_FLAT"]),
        # The largest count is MAX's length; the whole batch's, INPUT's.
        helper.make_node("Shape", ["OUT_COUNT"], ["BATCH_SHAPE"]),
        helper.make_node("Shape", ["MAX"], ["MAX_LEN"]),
        helper.make_node("Cast", ["MAX_LEN"], ["MAX_F"], to=f),
        helper.make_node("Expand", ["MAX_F", "BATCH_SHAPE"], ["OUT_MAX"]),
        helper.make_node("Shape", ["INPUT"], ["IN_LEN"]),
        helper.make_node("Cast", ["IN_LEN"], ["IN_F"], to=f),
        helper.make_node("Expand", ["IN_F", "BATCH_SHAPE"], ["OUT_TOTAL"]),
    ]
    return model("ragged", nodes,
                 [tensor("INPUT", f, ["n"]), tensor("COUNT", f, ["b"]), tensor("ACC", f, ["b"]),
                  tensor("ACC_ZERO", f, ["b1"]), tensor("ITEM", i, ["items", 1]), tensor("FLAT", i, ["items"]),
                  tensor("MAX", f, ["m"])],
                 [tensor("OUT_COUNT", f, ["b", 1]), tensor("OUT_ACC", f, ["b", 1]), tensor("OUT_START", f, ["b", 1]),
                  tensor("OUT_ITEM", i, ["items", 1]), tensor("OUT_FLAT", i, ["items", 1]),
                  tensor("OUT_MAX", f, ["b", 1]), tensor("OUT_TOTAL", f, ["b", 1])])


MODELS = {f.__name__: f for f in (add_sub, fixed_add_sub, strings, identities, accumulate, scalar, doubler, ragged,
                                  stateful_accumulate_fp32, stateful_accumulate_int32,
                                  stateful_accumulate_symbolic_seq, stateful_mixed)}


def write(directory, name):
    """Writes <directory>/<name>.onnx and returns its path."""
    path = os.path.join(directory, f"{name}.onnx")
    onnx.save(MODELS[name](), path)
    return path


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    names = argv[2:] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"unknown model(s): {', '.join(unknown)}; known: {', '.join(MODELS)}", file=sys.stderr)
        return 2
    os.makedirs(argv[1], exist_ok=True)
    for n in names:
        print(write(argv[1], n))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
