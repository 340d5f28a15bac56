package cli_test

import (
	"encoding/json"
	"net/http"
	"testing"
)

func issueToken(t *testing.T, base, apiKey string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/devices/enroll-tokens", nil)
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil || resp.StatusCode != 200 {
		t.Fatalf("issue token: %d %v", resp.StatusCode, err)
	}
	return b.Token
}
