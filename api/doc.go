// Package api is the lane's HTTP API as data: the request, response and
// event types, the error codes and the NDJSON stream's writer and reader,
// with no network I/O. It is the one definition both ends use: the lane's
// HTTP API (package lane/httpapi) writes these shapes, and every client
// (package client, the CLI, the MCP face, the executor's discovery and
// enrollment) reads them. docs/api.md is its prose.
//
// Where to start reading: types.go for the bodies, errors and paths;
// events.go and eventwriter.go for an instruction's stream.
package api
