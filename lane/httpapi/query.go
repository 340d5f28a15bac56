package httpapi

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/sema-agent/sema/api"
)

// The closed queries of the listing endpoints (the device list, the audit
// trail, the instruction history) and their opaque page cursors.

// closedQuery parses a raw query whose keys are among keys, each at most
// once; what names the listing in the error. Errors name the key and never
// echo a value.
func closedQuery(raw string, keys []string, what string) (url.Values, *apiError) {
	values, err := parseQuery(raw)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, api.CodeBodyShape, "the query string is malformed: %v", err)
	}
	for key, v := range values {
		switch {
		case !slices.Contains(keys, key):
			return nil, errorf(http.StatusBadRequest, api.CodeBodyShape, "unknown query parameter %q (%s takes %s)", clip(key), what, strings.Join(keys, ", "))
		case len(v) > 1:
			return nil, errorf(http.StatusBadRequest, api.CodeBodyShape, "the query parameter %q is given %d times", key, len(v))
		}
	}
	return values, nil
}

// pageCursor is the opaque cursor after position n of a listing whose
// cursors carry prefix, so that one listing's cursor is never taken for
// another's.
func pageCursor(prefix string, n int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(prefix + strconv.FormatInt(n, 10)))
}

// parsePageCursor reads a cursor pageCursor made with prefix.
func parsePageCursor(prefix, s string) (int64, bool) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return 0, false
	}
	digits, ok := strings.CutPrefix(string(b), prefix)
	if !ok {
		return 0, false
	}
	if digits == "0" {
		return 0, true
	}
	n, err := parsePositive(digits)
	return n, err == nil
}
