package lanetest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Response is an answer of the lane's HTTP API, read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON is the body as a JSON object; anything else fails the test.
func (r Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.Body, err)
	}
	return m
}

// Pin decodes body as a T, refusing a field T does not have, and checks
// that T encodes back to exactly body: the answer's shape is T's.
func Pin[T any](t testing.TB, what string, body []byte) T {
	t.Helper()
	var v T
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: %s does not decode as %T: %v", what, body, v, err)
	}
	again, _ := json.Marshal(v)
	if !bytes.Equal(again, bytes.TrimSpace(body)) {
		t.Errorf("%s: the lane sent\n%s\nthe api type gives\n%s", what, body, again)
	}
	return v
}

// Decode is a 200 answer decoded as a T, its shape pinned (Pin).
func Decode[T any](t testing.TB, r Response) T {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	return Pin[T](t, "answer", r.Body)
}

// Do sends method path with body to the lane at base, with apiKey as the
// bearer token when it is not "".
func Do(t testing.TB, base, method, path, apiKey, body string) Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Response{resp.StatusCode, resp.Header, b}
}

// WantError checks an error answer: the status, exactly errorCode and a
// message that mentions mentions.
func WantError(t testing.TB, r Response, status int, code, mentions string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d (%s), want %d", r.Status, r.Body, status)
	}
	m := r.JSON(t)
	if m["errorCode"] != code {
		t.Fatalf("errorCode %v (%s), want %s", m["errorCode"], r.Body, code)
	}
	msg, _ := m["message"].(string)
	if msg == "" || !strings.Contains(msg, mentions) {
		t.Fatalf("message %q does not mention %q", msg, mentions)
	}
	if len(m) != 2 {
		t.Fatalf("error body %s has keys beyond errorCode and message", r.Body)
	}
}

// NewPubkey is a new Ed25519 public key as enrollment sends it.
func NewPubkey(t testing.TB) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pub)
}

// EnrollBody is a POST /v1/devices/enroll body of token and pubkey.
func EnrollBody(token, pubkey string) string {
	b, _ := json.Marshal(map[string]string{
		"token": token, "pubkey": pubkey, "platformOs": "linux", "platformArch": "amd64",
		"displayName": "laptop", "workspaceRoot": "/home/u/work",
	})
	return string(b)
}
