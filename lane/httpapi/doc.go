// Package httpapi is the lane's HTTP API over the core of package lane: the
// routes callers use (capabilities, enrollment, devices, identities,
// sessions, instructions, uploads, cancels), their authentication and
// error answers, and the MCP face mounted on the same API.
//
// Start reading at New (httpapi.go): it builds the routes over one
// lane.Server. A request is authenticated, its body parsed into the
// shapes of package api, and handed to the core; what the core answers is
// written back in those shapes.
package httpapi
