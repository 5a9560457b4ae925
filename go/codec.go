package hubwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
)

// How a Go value becomes a payload and back (spec/PROTOCOL.md §6):
//   - []byte travels raw: no encoding, any codec accepted on input;
//   - Payload passes through as it is, codec and all (relays);
//   - anything else is MessagePack (the default) or JSON. Structs are maps
//     keyed by field name, using the `json` tags in both codecs; integers
//     take the shortest MessagePack form, as the spec asks.

type valueKind uint8

const (
	structured valueKind = iota
	rawBytes
	passThrough
)

// valueCodec encodes and decodes values of type T.
type valueCodec[T any] struct{ kind valueKind }

var (
	bytesType   = reflect.TypeFor[[]byte]()
	payloadType = reflect.TypeFor[Payload]()
)

func codecOf[T any]() valueCodec[T] {
	switch reflect.TypeFor[T]() {
	case bytesType:
		return valueCodec[T]{rawBytes}
	case payloadType:
		return valueCodec[T]{passThrough}
	}
	return valueCodec[T]{structured}
}

// wire is the codec a value of this type travels with when wanted is
// asked: raw for []byte, MessagePack when a structured value is asked for
// raw, else wanted.
func (vc valueCodec[T]) wire(wanted Codec) Codec {
	switch {
	case vc.kind == rawBytes:
		return CodecRaw
	case wanted == CodecRaw:
		return CodecMsgpack
	}
	return wanted
}

// schema is the JSON Schema advertised for T in HELLO.
func (vc valueCodec[T]) schema() any {
	if vc.kind == rawBytes {
		return map[string]any{"contentMediaType": "application/octet-stream"}
	}
	return map[string]any{}
}

func (vc valueCodec[T]) encode(v T, wanted Codec) (Payload, error) {
	switch vc.kind {
	case rawBytes:
		return Payload{Codec: CodecRaw, Bytes: *(*[]byte)(unsafe.Pointer(&v))}, nil
	case passThrough:
		return *(*Payload)(unsafe.Pointer(&v)), nil
	}
	codec := vc.wire(wanted)
	b, err := encodeValue(v, codec)
	return Payload{Codec: codec, Bytes: b}, err
}

func (vc valueCodec[T]) decode(p Payload) (T, error) {
	var v T
	switch vc.kind {
	case rawBytes:
		*(*[]byte)(unsafe.Pointer(&v)) = p.Bytes
		return v, nil
	case passThrough:
		*(*Payload)(unsafe.Pointer(&v)) = p
		return v, nil
	}
	err := decodeValue(p, &v)
	return v, err
}

var errRawInput = errors.New("expected structured input (msgpack or json), got raw bytes")

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// encodeValue encodes v as MessagePack or JSON.
func encodeValue(v any, codec Codec) ([]byte, error) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	if codec == CodecJSON {
		v, err := jsonReady(v) // byte strings as arrays of numbers (§6)
		if err != nil {
			return nil, err
		}
		enc := json.NewEncoder(buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return nil, err
		}
		return bytes.Clone(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
	}
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(buf)
	enc.UseCompactInts(true)
	enc.SetCustomStructTag("json")
	enc.SetOmitEmpty(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil
}

// decodeValue decodes a payload into *dst.
func decodeValue(p Payload, dst any) error {
	switch p.Codec {
	case CodecJSON:
		if err := json.Unmarshal(p.Bytes, dst); err != nil {
			return fmt.Errorf("json: %w", err)
		}
		return nil
	case CodecMsgpack:
		// One value of the shared data model, whatever the library would tolerate (§6.2).
		if err := checkMsgpack(p.Bytes); err != nil {
			return fmt.Errorf("msgpack: %w", err)
		}
		dec := msgpack.GetDecoder()
		defer msgpack.PutDecoder(dec)
		r := bytes.NewReader(p.Bytes)
		dec.Reset(r)
		dec.SetCustomStructTag("json")
		dec.SetMapDecoder(decodeMap)
		if err := dec.Decode(dst); err != nil {
			return fmt.Errorf("msgpack: %w", err)
		}
		return nil
	}
	return errRawInput
}

// decodeMap decodes maps inside untyped values as map[string]any, as JSON
// does (the library's default has interface keys for non-string maps).
func decodeMap(d *msgpack.Decoder) (any, error) {
	n, err := d.DecodeMapLen()
	if err != nil || n < 0 {
		return nil, err
	}
	m := make(map[string]any, n)
	for range n {
		k, err := d.DecodeInterface()
		if err != nil {
			return nil, err
		}
		v, err := d.DecodeInterface()
		if err != nil {
			return nil, err
		}
		m[fmt.Sprint(k)] = v
	}
	return m, nil
}
