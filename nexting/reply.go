package nexting

import "errors"

// Reply builds the error message that answers refused input — an unknown
// type, an unsupported version or profile, a malformed or oversize frame —
// and reports whether to send it at all. The short spec (§5) lets an
// implementation "silently drop malformed or attacker-controlled input when
// a reply would amplify traffic"; Reply turns that into two fixed rules:
//
//  1. Never answer an error with an error. A refused frame whose "t" was
//     "error" gets no reply, whatever its fault, so two endpoints can never
//     bounce errors back and forth without end.
//  2. Never send more than was received. When the reply frame would be
//     longer than the refused input (Error.Size: the bytes received, LF
//     included), it is dropped, so no input is ever answered with more
//     traffic than it cost to send — a stray LF or a short probe gets
//     nothing back. If the reply fits only without its id, the id is left
//     out.
//
// The reply echoes nothing from the input except a request id that has
// itself passed validation. Errors raised by an encoder (Size 0) never get
// a reply. Whether the peer is authorized to hear errors at all (the spec's
// other ground for silence: not revealing authorization state) is the
// session's decision, made before calling Reply.
func Reply(err error) (ErrorMessage, bool) {
	var e *Error
	if !errors.As(err, &e) || e.Type == TypeError || !e.Code.Valid() {
		return ErrorMessage{}, false
	}
	m := ErrorMessage{ID: e.ID, Code: e.Code}
	if m.ID != "" && replySize(m) > e.Size {
		m.ID = ""
	}
	if replySize(m) > e.Size {
		return ErrorMessage{}, false
	}
	return m, true
}

// replySize is the length of m's frame, LF included.
func replySize(m ErrorMessage) int {
	n := len(`{"v":1,"t":"error","code":""}`) + len(m.Code) + 1
	if m.ID != "" {
		n += len(`,"id":""`) + len(m.ID) // ids need no escaping
	}
	return n
}
