package engine

import (
	"fmt"
	"reflect"

	"hubwire.dev/go/frame"
)

// Payload is a payload as it travels: its codec and its bytes.
type Payload struct {
	Codec frame.Codec
	Bytes []byte
}

// Error is what a call (or a connection) ended with when it did not
// succeed: a status code from spec/errors.md, a message for humans, and for
// a failure the value the method declared, as it travelled.
type Error struct {
	Code    frame.Code
	Message string
	// Detail is a failure's value in the call's codec; nil otherwise.
	Detail *Payload
}

// Errorf returns an *Error with a formatted message.
func Errorf(code frame.Code, format string, a ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, a...)}
}

// Error returns "code: message", or the code alone.
func (e *Error) Error() string {
	if e.Message == "" {
		return "hubwire: " + e.Code.String()
	}
	return "hubwire: " + e.Code.String() + ": " + e.Message
}

// FailureDecoder is implemented by typed failure values (hubwire.Failure):
// errors.As on an *Error whose code is failure decodes its detail into a
// new one.
type FailureDecoder interface {
	DecodeFailure(p Payload) error
}

var failureDecoder = reflect.TypeFor[FailureDecoder]()

// As lets errors.As take a failure's value out as a typed failure: target
// is a **T whose *T implements FailureDecoder, and the detail must decode
// into it.
func (e *Error) As(target any) bool {
	if e.Code != frame.Failure || e.Detail == nil {
		return false
	}
	v := reflect.ValueOf(target)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Pointer {
		return false
	}
	pt := v.Elem().Type() // *T
	if !pt.Implements(failureDecoder) {
		return false
	}
	fresh := reflect.New(pt.Elem())
	if fresh.Interface().(FailureDecoder).DecodeFailure(*e.Detail) != nil {
		return false
	}
	v.Elem().Set(fresh)
	return true
}

func unavailable(format string, a ...any) *Error { return Errorf(frame.Unavailable, format, a...) }

func fromFrame(e *frame.Error) *Error { return &Error{Code: e.Code, Message: e.Message} }
