package onnx

import (
	"encoding/binary"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// The fields of onnx.proto3 (github.com/onnx/onnx, onnx/onnx.proto3)
// that Write fills, by message.
const (
	modelIRVersion    = 1 // ModelProto
	modelProducerName = 2
	modelProducerVer  = 3
	modelGraph        = 7
	modelOpsetImport  = 8

	opsetDomain  = 1 // OperatorSetIdProto
	opsetVersion = 2

	graphNode        = 1 // GraphProto
	graphName        = 2
	graphInitializer = 5
	graphInput       = 11
	graphOutput      = 12

	nodeInput     = 1 // NodeProto
	nodeOutput    = 2
	nodeName      = 3
	nodeOpType    = 4
	nodeAttribute = 5

	attrName   = 1 // AttributeProto
	attrF      = 2
	attrI      = 3
	attrS      = 4
	attrInts   = 8
	attrType   = 20
	attrFloat  = 1 // AttributeProto.AttributeType
	attrInt    = 2
	attrString = 3
	attrIntsT  = 7

	tensorDims     = 1 // TensorProto
	tensorDataType = 2
	tensorName     = 8
	tensorRawData  = 9
	dtypeFloat     = 1 // TensorProto.DataType
	dtypeInt64     = 7

	valueName = 1 // ValueInfoProto
	valueType = 2

	typeTensor       = 1 // TypeProto
	tensorTypeElem   = 1 // TypeProto.Tensor
	tensorTypeShape  = 2
	shapeDim         = 1 // TensorShapeProto
	dimValue         = 1 // TensorShapeProto.Dimension
	dimParam         = 2
	irVersion        = 8 // ONNX 1.10's IR, which opset 13 needs at least 7 of
	opsetVersionUsed = 13
)

func appendString(b []byte, n protowire.Number, s string) []byte {
	return protowire.AppendString(protowire.AppendTag(b, n, protowire.BytesType), s)
}

func appendBytes(b []byte, n protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, n, protowire.BytesType), v)
}

func appendVarint(b []byte, n protowire.Number, v int64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(b, n, protowire.VarintType), uint64(v))
}

// attr is one of a node's attributes: an int, a list of ints, a float
// or a string.
type attr struct {
	name string
	i    *int64
	ints []int64
	f    *float32
	s    *string
}

func strAttr(name, v string) attr { return attr{name: name, s: &v} }

func intAttr(name string, v int) attr { x := int64(v); return attr{name: name, i: &x} }
func floatAttr(name string, v float64) attr {
	x := float32(v)
	return attr{name: name, f: &x}
}
func intsAttr(name string, v ...int) attr {
	a := attr{name: name, ints: []int64{}}
	for _, x := range v {
		a.ints = append(a.ints, int64(x))
	}
	return a
}

func (a attr) encode() []byte {
	b := appendString(nil, attrName, a.name)
	switch {
	case a.i != nil:
		b = appendVarint(b, attrI, *a.i)
		b = appendVarint(b, attrType, attrInt)
	case a.s != nil:
		b = appendString(b, attrS, *a.s)
		b = appendVarint(b, attrType, attrString)
	case a.f != nil:
		b = protowire.AppendFixed32(protowire.AppendTag(b, attrF, protowire.Fixed32Type), math.Float32bits(*a.f))
		b = appendVarint(b, attrType, attrFloat)
	default:
		for _, v := range a.ints {
			b = appendVarint(b, attrInts, v)
		}
		b = appendVarint(b, attrType, attrIntsT)
	}
	return b
}

// node is a NodeProto.
type node struct {
	op, name string
	in, out  []string
	attrs    []attr
}

func (n node) encode() []byte {
	var b []byte
	for _, s := range n.in {
		b = appendString(b, nodeInput, s)
	}
	for _, s := range n.out {
		b = appendString(b, nodeOutput, s)
	}
	b = appendString(b, nodeName, n.name)
	b = appendString(b, nodeOpType, n.op)
	for _, a := range n.attrs {
		b = appendBytes(b, nodeAttribute, a.encode())
	}
	return b
}

// tensor is an initializer: float32 values, or int64 ones (a Reshape's
// shape).
type tensor struct {
	name   string
	dims   []int
	floats []float32
	ints   []int64
}

func (t tensor) encode() []byte {
	var b []byte
	for _, d := range t.dims {
		b = appendVarint(b, tensorDims, int64(d))
	}
	var raw []byte
	if t.ints != nil {
		b = appendVarint(b, tensorDataType, dtypeInt64)
		for _, v := range t.ints {
			raw = binary.LittleEndian.AppendUint64(raw, uint64(v))
		}
	} else {
		b = appendVarint(b, tensorDataType, dtypeFloat)
		for _, v := range t.floats {
			raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
		}
	}
	b = appendString(b, tensorName, t.name)
	return appendBytes(b, tensorRawData, raw)
}

// valueInfo is a graph input's or output's ValueInfoProto: float32 of
// dims, the first the batch ("N").
func valueInfo(name string, dims []int) []byte {
	var shape []byte
	shape = appendBytes(shape, shapeDim, appendString(nil, dimParam, "N"))
	for _, d := range dims {
		shape = appendBytes(shape, shapeDim, appendVarint(nil, dimValue, int64(d)))
	}
	tt := appendVarint(nil, tensorTypeElem, dtypeFloat)
	tt = appendBytes(tt, tensorTypeShape, shape)
	b := appendString(nil, valueName, name)
	return appendBytes(b, valueType, appendBytes(nil, typeTensor, tt))
}
