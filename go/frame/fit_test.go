package frame

import (
	"fmt"
	"strings"
	"testing"
)

// A HELLO too large for every peer is shortened (spec/PROTOCOL.md
// §4.1.2): docs first, then schemas; names and kinds always stay.
func TestHelloFit(t *testing.T) {
	hello := func(n, schemaPad, docPad int) *Hello {
		h := NewHello(PeerInfo{Name: "many", Lang: "go", Version: "0"})
		for i := range n {
			h.Methods = append(h.Methods, MethodInfo{Name: fmt.Sprintf("m%d", i), Kind: Unary,
				Input: map[string]any{"description": strings.Repeat("x", schemaPad)}, Output: map[string]any{}, Errors: true, Doc: strings.Repeat("d", docPad)})
		}
		return h
	}
	small := hello(10, 100, 100)
	small.Fit()
	if small.Methods[0].Doc == "" || small.Methods[0].Errors != true {
		t.Errorf("a HELLO that fits was changed: %+v", small.Methods[0])
	}
	docs := hello(3000, 30, 300)
	service := docs.Methods
	docs.Fit()
	if n := len(docs.JSON()); n > HelloLimit || docs.Methods[0].Doc != "" || docs.Methods[0].Errors != true {
		t.Errorf("docs first: %d bytes, %+v", n, docs.Methods[0])
	}
	if service[0].Doc == "" {
		t.Error("Fit changed the service's own method list")
	}
	schemas := hello(3000, 300, 10)
	schemas.Fit()
	if n := len(schemas.JSON()); n > HelloLimit || schemas.Methods[0].Errors != nil || len(schemas.Methods) != 3000 {
		t.Errorf("then schemas: %d bytes, %+v", n, schemas.Methods[0])
	}
}
