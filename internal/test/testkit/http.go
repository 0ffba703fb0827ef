package testkit

import (
	"io"
	"net/http"
	"testing"
)

// Response is the whole answer to an HTTP request.
type Response struct {
	Status  int
	Header  http.Header
	Trailer http.Header // read after the body
	Body    string
}

// Send sends req with client (a test server's, whose connections close
// with it; http.DefaultClient when nil) and reads the whole answer,
// trailers included. It fails the test if the request or the reading
// fails.
func Send(tb testing.TB, client *http.Client, req *http.Request) Response {
	tb.Helper()
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return Response{Status: resp.StatusCode, Header: resp.Header, Trailer: resp.Trailer, Body: string(b)}
}
