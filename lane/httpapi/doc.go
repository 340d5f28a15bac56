// Package httpapi is the lane's HTTP API over the core of package lane:
// capabilities, enrollment, devices, identities and API keys, sessions,
// instructions and their NDJSON events, streamed uploads, cancels, the
// endpoints replicas call on each other, the HTTP limits, the Prometheus
// text and the MCP face. The shapes it reads and writes are package api's.
//
// Where to start reading: New (httpapi.go) builds the routes over one
// lane.Server. One instruction, file by file in order: httpapi.go routes
// POST /v1/devices/{id}/instructions; forward.go sends it to the replica
// that holds the device when that is another (routed); httpapi.go
// authenticates it; instructions_http.go (postInstruction) reads its body
// within the content budget (budget.go, instruction_body.go), parses it
// and hands it to the core (dispatchHTTP: lane.Server.DispatchFor; the walk
// through package lane is in its doc); events_http.go (streamCall) writes
// the Call it returns to the caller as NDJSON until it settles.
// Refusals are api.Error answers (httperr.go); closed request bodies are
// parsed by body.go, each the shape of a struct of package api.
package httpapi
