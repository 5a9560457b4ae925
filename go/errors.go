package hubwire

import (
	"errors"
	"fmt"

	"hubwire.dev/go/internal/engine"
)

// Error is what a call or a connection ended with when it did not
// succeed: Code (spec/errors.md), Message, and for a failure its value as
// it travelled. Every error a call returns is an *Error:
//
//	var e *hubwire.Error
//	if errors.As(err, &e) && e.Code == hubwire.CodeUnavailable { /* retry elsewhere */ }
type Error = engine.Error

// CodeOf returns the status code of err: its *Error's, CodeOK for nil,
// CodeInternal for any other error.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// Errorf returns an *Error with code and a formatted message. A handler
// returns one to answer with that code (e.g. CodeInvalidArgument); any
// other error, and any panic, is a defect.
func Errorf(code Code, format string, a ...any) *Error { return engine.Errorf(code, format, a...) }

// Failure is a declared, typed failure: part of a method's contract, as
// opposed to a defect. A handler returns Fail(value); the caller gets the
// value back with errors.As:
//
//	var f *hubwire.Failure[DivError]
//	if errors.As(err, &f) { fmt.Println(f.Value.Kind) }
type Failure[T any] struct {
	Value T
}

// Fail returns the typed failure value as an error, for a handler to
// return. It travels in the call's codec.
func Fail[T any](value T) error { return &Failure[T]{Value: value} }

// Error describes the failure.
func (f *Failure[T]) Error() string { return fmt.Sprintf("hubwire: failure: %+v", f.Value) }

// DecodeFailure decodes a failure's payload into f.Value (errors.As calls
// it through *Error).
func (f *Failure[T]) DecodeFailure(p Payload) error {
	v, err := codecOf[T]().decode(p)
	if err != nil {
		return err
	}
	f.Value = v
	return nil
}

// failureEncoder is a Failure of any type, as a handler's error.
type failureEncoder interface {
	encodeFailure(codec Codec) (Payload, error)
}

func (f *Failure[T]) encodeFailure(codec Codec) (Payload, error) {
	return codecOf[T]().encode(f.Value, codec)
}

// handlerError turns what a handler returned into the call's status: a
// Failure is encoded in the request's codec, an *Error keeps its code,
// anything else is a defect.
func handlerError(err error, codec Codec) error {
	var fe failureEncoder
	if errors.As(err, &fe) {
		p, e := fe.encodeFailure(codec)
		if e != nil {
			return Errorf(CodeDefect, "failure value could not be encoded: %v", e)
		}
		return &Error{Code: CodeFailure, Detail: &p}
	}
	return engine.AsError(err)
}
