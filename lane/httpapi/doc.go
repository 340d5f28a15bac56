// Package httpapi is the lane's HTTP API over the core of package lane:
// capabilities, enrollment, devices, identities and API keys, sessions,
// instructions and their NDJSON events, streamed uploads, cancels, the
// endpoints replicas call on each other, the HTTP limits, the Prometheus
// text and the MCP face. The shapes it reads and writes are package api's.
//
// Where to start reading: New (httpapi.go) builds the routes over one
// lane.Server. A request is authenticated (httpapi.go), its body read
// within the content budget (budget.go, instruction_body.go) and parsed
// (body.go, instructions_http.go), and handed to the core
// (lane.Server.DispatchAs); the Call it gets back is written to the caller
// as NDJSON (events_http.go) until it settles. A device another replica
// holds is forwarded there (forward.go). Refusals are api.Error answers
// (httperr.go).
package httpapi
