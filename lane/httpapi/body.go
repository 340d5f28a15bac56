package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/sema-agent/sema/api"

	"github.com/go-json-experiment/json/jsontext"
)

// maxBodyBytes bounds a management request body; the largest legal enroll
// body is under 2 KiB.
const maxBodyBytes = 16 << 10

// bodyField is one key of a closed request body. Every value is a string.
type bodyField struct {
	name     string
	required bool
	// check returns what is wrong with a value, or "".
	check func(string) string
}

// fieldsOf is the closed body whose shape is the struct T of api/: its
// string fields' JSON keys, in order, required unless omitempty, each with
// its check from checks. T and checks must name the same keys; they are
// fixed at build time, so a mismatch panics when the package starts.
func fieldsOf[T any](checks map[string]func(string) string) []bodyField {
	typ := reflect.TypeFor[T]()
	fields := make([]bodyField, 0, typ.NumField())
	for sf := range typ.Fields() {
		name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
		check, ok := checks[name]
		if sf.Type.Kind() != reflect.String || name == "" || name == "-" || !ok {
			panic(fmt.Sprintf("httpapi: %s.%s (key %q) is not a string field with a check", typ, sf.Name, name))
		}
		fields = append(fields, bodyField{name: name, required: !slices.Contains(strings.Split(opts, ","), "omitempty"), check: check})
	}
	for name := range checks {
		if !known(fields, name) {
			panic(fmt.Sprintf("httpapi: a check for key %q, which %s does not have", name, typ))
		}
	}
	return fields
}

// readBody reads a request body of at most maxBodyBytes.
func readBody(r *http.Request) ([]byte, *apiError) { return readBodyLimit(r, maxBodyBytes) }

// readBodyLimit reads a request body of at most limit bytes.
func readBodyLimit(r *http.Request, limit int64) ([]byte, *apiError) {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, limit))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, errorf(http.StatusRequestEntityTooLarge, api.CodeBodyTooLarge, "the request body is over %d bytes", limit)
	}
	if err != nil {
		return nil, errorf(http.StatusBadRequest, api.CodeInvalidJSON, "the request body could not be read")
	}
	return b, nil
}

// parseClosedBody reads a closed-shape JSON object: only the named keys,
// the required ones present, every value a string passing its check. An
// empty body counts as {} when allowEmpty. Messages name the key, never a
// value (a value may be a token).
func parseClosedBody(body []byte, fields []bodyField, allowEmpty bool) (map[string]string, *apiError) {
	if allowEmpty && len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if !jsontext.Value(body).IsValid() {
		if jsontext.Value(body).IsValid(jsontext.AllowDuplicateNames(true)) {
			return nil, errorf(http.StatusBadRequest, api.CodeBodyShape, "the request body repeats a key")
		}
		return nil, errorf(http.StatusBadRequest, api.CodeInvalidJSON, "the request body is not valid JSON")
	}
	if jsontext.Value(body).Kind() != '{' {
		return nil, errorf(http.StatusBadRequest, api.CodeBodyShape, "the request body must be a JSON object")
	}
	d := jsontext.NewDecoder(bytes.NewReader(body))
	d.ReadToken() // '{'
	raw := map[string]jsontext.Value{}
	for d.PeekKind() != '}' {
		name, _ := d.ReadToken()
		key := name.String()
		v, _ := d.ReadValue()
		if !known(fields, key) {
			return nil, errorf(http.StatusBadRequest, api.CodeBodyShape, "unknown key %q", clip(key))
		}
		raw[key] = v.Clone()
	}
	for _, f := range fields {
		if _, ok := raw[f.name]; !ok && f.required {
			return nil, errorf(http.StatusBadRequest, api.CodeBodyShape, "missing required key %q", f.name)
		}
	}
	out := make(map[string]string, len(raw))
	for _, f := range fields {
		v, ok := raw[f.name]
		if !ok {
			continue
		}
		if v.Kind() != '"' {
			return nil, errorf(http.StatusBadRequest, api.CodeFieldInvalid, "%s must be a string", f.name)
		}
		s, err := jsontext.AppendUnquote(nil, v)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, api.CodeFieldInvalid, "%s is not a valid string", f.name)
		}
		if f.check != nil {
			if problem := f.check(string(s)); problem != "" {
				return nil, errorf(http.StatusBadRequest, api.CodeFieldInvalid, "%s %s", f.name, problem)
			}
		}
		out[f.name] = string(s)
	}
	return out, nil
}

func known(fields []bodyField, key string) bool {
	for _, f := range fields {
		if f.name == key {
			return true
		}
	}
	return false
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// maxBytes is a check: at most n bytes.
func maxBytes(n int) func(string) string {
	return func(s string) string {
		if len(s) > n {
			return fmt.Sprintf("must be at most %d bytes, got %d", n, len(s))
		}
		return ""
	}
}
