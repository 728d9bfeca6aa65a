package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The request headers that carry a message's metadata to an HTTP worker.
// A message header of the same name (in any case) is replaced by them.
const (
	HeaderStream    = "Cg-Stream"
	HeaderGroup     = "Cg-Group"
	HeaderMember    = "Cg-Member"
	HeaderSubject   = "Cg-Subject"
	HeaderPartition = "Cg-Partition"
	HeaderStreamSeq = "Cg-Stream-Seq"
	HeaderDelivered = "Cg-Delivered"
	HeaderKey       = "Cg-Key"
)

// HTTP posts each message to URL.
type HTTP struct {
	URL     string
	Timeout time.Duration
	Client  *http.Client
}

// NewHTTP is an HTTP worker keeping up to conns connections open.
func NewHTTP(url string, timeout time.Duration, conns int) *HTTP {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = max(conns, 2)
	return &HTTP{URL: url, Timeout: timeout, Client: &http.Client{Transport: tr}}
}

// Post sends one message: its body as the request body, its headers (those
// with names HTTP allows) and its metadata as request headers. A 2xx
// answer is success; 408, 429, 5xx, any other answer and no answer within
// the timeout are failures; any other 4xx is a PoisonError (the service
// refused the message: retrying cannot help).
func (h *HTTP) Post(m Meta, data []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), h.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(data))
	if err != nil {
		return err
	}
	for name, vals := range m.Headers {
		if validHeaderName(name) && !metaHeader(name) {
			req.Header[name] = vals
		}
	}
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	req.Header.Set(HeaderStream, m.Stream)
	req.Header.Set(HeaderGroup, m.Group)
	req.Header.Set(HeaderMember, m.Member)
	req.Header.Set(HeaderSubject, m.Subject)
	req.Header.Set(HeaderPartition, strconv.Itoa(m.Partition))
	req.Header.Set(HeaderStreamSeq, strconv.FormatUint(m.Seq, 10))
	req.Header.Set(HeaderDelivered, strconv.FormatUint(m.Delivered, 10))
	if m.HasKey {
		req.Header.Set(HeaderKey, m.Key)
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("no answer within %s (--exec-timeout)", h.Timeout)
		}
		return err
	}
	defer resp.Body.Close()
	// Read (a little of) the body: the reason for a failure, and the
	// connection can be used again.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	why := "HTTP " + resp.Status
	if s := firstLine(body); s != "" {
		why += ": " + s
	}
	if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests {
		return &PoisonError{Err: errors.New(why)}
	}
	return errors.New(why)
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// metaHeader says whether name is one of the metadata headers.
func metaHeader(name string) bool {
	for _, h := range []string{HeaderStream, HeaderGroup, HeaderMember, HeaderSubject, HeaderPartition, HeaderStreamSeq, HeaderDelivered, HeaderKey} {
		if strings.EqualFold(name, h) {
			return true
		}
	}
	return false
}

// validHeaderName: an HTTP token (RFC 9110), which a NATS header name
// need not be.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
