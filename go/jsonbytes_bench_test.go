package hubwire

import "testing"

// The JSON payload path with and without byte strings (spec/PROTOCOL.md §6:
// in JSON a byte string is an array of numbers).

type benchPlain struct {
	Name  string            `json:"name"`
	Count int               `json:"count"`
	Tags  []string          `json:"tags"`
	Meta  map[string]string `json:"meta"`
}

type benchBytes struct {
	Name string `json:"name"`
	Data []byte `json:"data"`
}

func benchEncode(b *testing.B, v any) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodeValue(v, CodecJSON); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeJSONPlain(b *testing.B) {
	benchEncode(b, benchPlain{Name: "hello", Count: 3, Tags: []string{"a", "b"}, Meta: map[string]string{"k": "v"}})
}

func BenchmarkEncodeJSONBytes(b *testing.B) {
	benchEncode(b, benchBytes{Name: "hello", Data: make([]byte, 64)})
}

func BenchmarkEncodeJSONMap(b *testing.B) {
	benchEncode(b, map[string]any{"name": "hello", "count": 3, "tags": []any{"a", "b"}})
}
