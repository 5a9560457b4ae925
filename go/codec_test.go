package hubwire

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// spec/vectors/codecs.json through the SDK's own payload codecs: decoding
// gives the value, encoding the value gives exactly the bytes (shortest
// MessagePack forms, compact JSON, key order kept).

// omap is a JSON object with its key order kept, as the vectors need.
type omap []struct {
	k string
	v any
}

func (m omap) EncodeMsgpack(enc *msgpack.Encoder) error {
	if err := enc.EncodeMapLen(len(m)); err != nil {
		return err
	}
	for _, e := range m {
		if err := enc.EncodeString(e.k); err != nil {
			return err
		}
		if err := enc.Encode(e.v); err != nil {
			return err
		}
	}
	return nil
}

func (m omap) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range m {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := encodeValue(e.k, CodecJSON)
		v, err := encodeValue(e.v, CodecJSON)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// ordered parses JSON keeping object key order; integers become int64.
func ordered(d *json.Decoder) (any, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch x := tok.(type) {
	case json.Delim:
		if x == '[' {
			out := []any{}
			for d.More() {
				v, err := ordered(d)
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
			_, err := d.Token()
			return out, err
		}
		m := omap{}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return nil, err
			}
			v, err := ordered(d)
			if err != nil {
				return nil, err
			}
			m = append(m, struct {
				k string
				v any
			}{k.(string), v})
		}
		_, err := d.Token()
		return m, err
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		return x.Float64()
	}
	return tok, nil
}

// norm makes values comparable: numbers as float64, maps unordered.
func norm(v any) any {
	switch x := v.(type) {
	case omap:
		m := map[string]any{}
		for _, e := range x {
			m[e.k] = norm(e.v)
		}
		return m
	case map[string]any:
		m := map[string]any{}
		for k, e := range x {
			m[k] = norm(e)
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = norm(e)
		}
		return out
	case nil, bool, string:
		return x
	}
	var f float64
	fmt.Sscan(fmt.Sprint(v), &f)
	return f
}

func TestCodecVectors(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "spec", "vectors", "codecs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []struct {
			Name       string          `json:"name"`
			Value      json.RawMessage `json:"value"`
			MsgpackHex string          `json:"msgpack_hex"`
			JSON       string          `json:"json"`
		} `json:"cases"`
		Bin []struct {
			Name       string `json:"name"`
			BytesHex   string `json:"bytes_hex"`
			MsgpackHex string `json:"msgpack_hex"`
			JSON       string `json:"json"`
		} `json:"bin"`
		JSONNumbers []struct {
			Name   string `json:"name"`
			JSON   string `json:"json"`
			F64Hex string `json:"f64_hex"`
		} `json:"json_numbers"`
	}
	if err := json.Unmarshal(text, &file); err != nil || len(file.Cases) < 30 {
		t.Fatalf("codecs.json: %v (%d cases)", err, len(file.Cases))
	}
	for _, c := range file.Cases {
		t.Run(c.Name, func(t *testing.T) {
			d := json.NewDecoder(strings.NewReader(string(c.Value)))
			d.UseNumber()
			value, err := ordered(d)
			if err != nil {
				t.Fatal(err)
			}
			mp, _ := hex.DecodeString(c.MsgpackHex)
			if got, err := encodeValue(value, CodecMsgpack); err != nil || !bytes.Equal(got, mp) {
				t.Errorf("msgpack encode: %x (%v), want %x", got, err, mp)
			}
			if got, err := encodeValue(value, CodecJSON); err != nil || string(got) != c.JSON {
				t.Errorf("json encode: %s (%v), want %s", got, err, c.JSON)
			}
			for _, p := range []Payload{{Codec: CodecMsgpack, Bytes: mp}, {Codec: CodecJSON, Bytes: []byte(c.JSON)}} {
				var got any
				if err := decodeValue(p, &got); err != nil || !reflect.DeepEqual(norm(got), norm(value)) {
					t.Errorf("%s decode: %#v (%v), want %#v", p.Codec, got, err, value)
				}
			}
		})
	}
	for _, c := range file.Bin {
		t.Run(c.Name, func(t *testing.T) {
			b, _ := hex.DecodeString(c.BytesHex)
			mp, _ := hex.DecodeString(c.MsgpackHex)
			if got, err := encodeValue(b, CodecMsgpack); err != nil || !bytes.Equal(got, mp) {
				t.Errorf("encode: %x (%v), want %x", got, err, mp)
			}
			var got []byte
			if err := decodeValue(Payload{Codec: CodecMsgpack, Bytes: mp}, &got); err != nil || !bytes.Equal(got, b) {
				t.Errorf("decode: %x (%v)", got, err)
			}
			if c.JSON == "" {
				t.Fatal("bin case without json")
			}
			if got, err := encodeValue(b, CodecJSON); err != nil || string(got) != c.JSON {
				t.Errorf("json encode: %s (%v), want %s", got, err, c.JSON)
			}
			got = nil
			if err := decodeValue(Payload{Codec: CodecJSON, Bytes: []byte(c.JSON)}, &got); err != nil || !bytes.Equal(got, b) || got == nil {
				t.Errorf("json decode: %x (%v)", got, err)
			}
		})
	}
	for _, c := range file.JSONNumbers {
		t.Run("json_numbers/"+c.Name, func(t *testing.T) {
			var f float64
			if err := decodeValue(Payload{Codec: CodecJSON, Bytes: []byte(c.JSON)}, &f); err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%016x", math.Float64bits(f)); got != c.F64Hex {
				t.Errorf("%s decodes to bits %s, want %s", c.JSON, got, c.F64Hex)
			}
		})
	}
}
