package hubwire

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// One value of the data model (spec/PROTOCOL.md §6.2), the same cases as
// the Rust and TypeScript checks.
func TestCheckMsgpack(t *testing.T) {
	for _, h := range []string{"c0", "01", "ca3fc00000", "cb3ff8000000000000", "a161", "c40100", "92c3c2", "81a16101", "82a16180a162910a", "de0001a16101", "dc000101"} {
		b, _ := hex.DecodeString(h)
		if err := checkMsgpack(b); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	for _, c := range []struct{ hex, why string }{
		{"", "ends inside"}, {"0102", "trailing"}, {"80c0", "trailing"}, {"92c0", "ends inside"}, {"cd01", "ends inside"},
		{"ddffffffff", "ends inside"}, {"810102", "map key"}, {"81c4016101", "map key"}, {"9181c001", "map key"},
		{"d40100", "ext"}, {"c7020501ff", "ext"}, {"d6ff00000000", "ext"}, {"c1", "0xc1"}, {"a2c328", "UTF-8"},
	} {
		b, _ := hex.DecodeString(c.hex)
		if err := checkMsgpack(b); err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: got %v, want an error about %q", c.hex, err, c.why)
		}
	}
	nested := func(n int) []byte { return append(bytes.Repeat([]byte{0x91}, n), 0xc0) }
	if err := checkMsgpack(nested(maxDepth)); err != nil {
		t.Errorf("%d levels: %v", maxDepth, err)
	}
	if err := checkMsgpack(nested(maxDepth + 1)); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("%d levels: %v", maxDepth+1, err)
	}
}
