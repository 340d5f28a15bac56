// Package lanetest holds what tests and benchmarks of several packages do
// against a running lane over its HTTP API.
package lanetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// IssueToken asks the lane at base for an enrollment token
// (POST /v1/devices/enroll-tokens) with an API key.
func IssueToken(ctx context.Context, base, apiKey string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/devices/enroll-tokens", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var b struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil || resp.StatusCode != http.StatusOK || b.Token == "" {
		return "", fmt.Errorf("issuing an enrollment token: %d %v", resp.StatusCode, err)
	}
	return b.Token, nil
}
