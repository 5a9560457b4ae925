package hubwire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Byte strings anywhere inside a JSON payload are arrays of numbers (§6).

type Blob []byte

type inner struct {
	Raw []byte `json:"raw"`
}

type Exported struct {
	Data Blob `json:"data,omitempty"`
}

type node struct {
	Tag  []byte  `json:"tag"`
	Kids []*node `json:"kids,omitempty"`
}

type selfMarshal struct{ B []byte }

func (selfMarshal) MarshalJSON() ([]byte, error) { return []byte(`"mine"`), nil }

func (*selfMarshal) UnmarshalJSON([]byte) error { return nil }

type withAll struct {
	inner                     // unexported embedded struct: fields promoted
	*Exported                 // embedded pointer
	Blob                      // embedded non-struct: a field named Blob
	Name      string          `json:"name"`
	Many      [][]byte        `json:"many"`
	ByKey     map[int]Blob    `json:"by_key"`
	Any       any             `json:"any"`
	Ptr       *[]byte         `json:"ptr"`
	Nil       []byte          `json:"nil"`
	Empty     []byte          `json:"empty,omitempty"`
	Skip      []byte          `json:"-"`
	Arr       [2][]byte       `json:"arr"`
	Raw       json.RawMessage `json:"rawmsg"`
	Mine      selfMarshal     `json:"mine"`
	When      time.Time       `json:"when"`
	hidden    []byte
}

func encodeJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := encodeValue(v, CodecJSON)
	if err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	return string(b)
}

func TestJSONBytesShapes(t *testing.T) {
	p := []byte{9}
	v := withAll{
		inner:    inner{Raw: []byte{1, 2}},
		Exported: &Exported{Data: Blob{3}},
		Blob:     Blob{4},
		Name:     "x",
		Many:     [][]byte{{5}, nil, {}},
		ByKey:    map[int]Blob{7: {6}},
		Any:      map[string]any{"b": []byte{7}, "l": []any{Blob{8}, "s"}},
		Ptr:      &p,
		Skip:     []byte{1},
		Arr:      [2][]byte{{10}},
		Raw:      json.RawMessage(`{"k":1}`),
		Mine:     selfMarshal{B: []byte{1}},
		When:     time.Unix(0, 0).UTC(),
		hidden:   []byte{1},
	}
	want := `{"raw":[1,2],"data":[3],"Blob":[4],"name":"x","many":[[5],null,[]],"by_key":{"7":[6]},` +
		`"any":{"b":[7],"l":[[8],"s"]},"ptr":[9],"nil":null,"arr":[[10],null],"rawmsg":{"k":1},"mine":"mine",` +
		`"when":"1970-01-01T00:00:00Z"}`
	for _, x := range []any{v, &v} {
		if got := encodeJSON(t, x); got != want {
			t.Errorf("%T:\n got %s\nwant %s", x, got, want)
		}
	}
	// The same value decodes back, from arrays.
	var back withAll
	if err := decodeValue(Payload{Codec: CodecJSON, Bytes: []byte(want)}, &back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.inner.Raw, []byte{1, 2}) || !bytes.Equal(back.Data, []byte{3}) || !bytes.Equal(back.Blob, []byte{4}) ||
		!bytes.Equal(*back.Ptr, p) || len(back.Many) != 3 || !bytes.Equal(back.ByKey[7], []byte{6}) {
		t.Errorf("decoded %+v", back)
	}
	// The source value is untouched.
	if !bytes.Equal(v.inner.Raw, []byte{1, 2}) || v.Any.(map[string]any)["b"].([]byte)[0] != 7 {
		t.Error("the value changed")
	}
}

func TestJSONBytesTopLevelAndRecursive(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{Blob{1, 255}, `[1,255]`},
		{[]byte(nil), `null`},
		{&Exported{}, `{}`},
		{[]any{[]byte{0}}, `[[0]]`},
		{&node{Tag: []byte{1}, Kids: []*node{{Tag: []byte{2}}, nil}}, `{"tag":[1],"kids":[{"tag":[2]},null]}`},
		{struct{ A any }{}, `{"A":null}`},
		{map[string]string{"a": "b"}, `{"a":"b"}`},
	} {
		if got := encodeJSON(t, c.v); got != c.want {
			t.Errorf("%T: got %s, want %s", c.v, got, c.want)
		}
	}
}

func TestJSONBytesDecodesBase64Too(t *testing.T) {
	var v struct {
		B []byte `json:"b"`
	}
	if err := decodeValue(Payload{Codec: CodecJSON, Bytes: []byte(`{"b":"AQI="}`)}, &v); err != nil || !bytes.Equal(v.B, []byte{1, 2}) {
		t.Errorf("base64: %v %v", v.B, err)
	}
	if err := decodeValue(Payload{Codec: CodecJSON, Bytes: []byte(`{"b":[256]}`)}, &v); err == nil {
		t.Error("256 accepted as a byte")
	}
}

func TestJSONBytesCycle(t *testing.T) {
	type loop struct {
		B    []byte `json:"b"`
		Next *loop  `json:"next"`
	}
	l := &loop{B: []byte{1}}
	l.Next = l
	if _, err := encodeValue(l, CodecJSON); err == nil || !strings.Contains(err.Error(), "cyclic") {
		t.Errorf("cycle: %v", err)
	}
}
