package device_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
)

// enrollHTTP issues an enrollment token (POST with an empty body).
func enrollHTTP(t *testing.T, url, apiKey string) (string, error) {
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, nil)
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var b struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil || resp.StatusCode != 200 {
		return "", fmt.Errorf("issue token: %d %v", resp.StatusCode, err)
	}
	return b.Token, nil
}
