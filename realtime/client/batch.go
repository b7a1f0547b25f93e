package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Write is one op of an atomic batch (POST /api/db/batch). Op is one of
// "set" (Data), "update" (OldKey, NewKey, Value, Type), "delete",
// "deleteField" (Field), "increment" (Field, By), "serverTimestamp"
// (Field), "arrayUnion" and "arrayRemove" (Field, Values). IfMatch, when
// set, is the revision the document must have (0: must not exist).
type Write struct {
	Op         string          `json:"op"`
	Collection string          `json:"collection"`
	Data       any             `json:"data,omitempty"`
	OldKey     string          `json:"oldKey,omitempty"`
	NewKey     string          `json:"newKey,omitempty"`
	Value      json.RawMessage `json:"value,omitempty"`
	Type       string          `json:"type,omitempty"`
	Field      string          `json:"field,omitempty"`
	By         *float64        `json:"by,omitempty"`
	Values     []any           `json:"values,omitempty"`
	IfMatch    *uint64         `json:"ifMatch,omitempty"`
}

// BatchResult is the answer to a committed batch: every write shares its
// revision (and a subscriber receives its changes with that revision).
type BatchResult struct {
	Revision uint64 `json:"revision"`
	Results  []struct {
		Collection string `json:"collection"`
		Revision   uint64 `json:"revision"`
		// Exists is false after a delete.
		Exists bool `json:"exists"`
	} `json:"results"`
}

// Batch commits writes as one entry, all or none, with the connection's
// credentials, through the node it was dialled to.
func (c *Conn) Batch(ctx context.Context, writes []Write) (*BatchResult, error) {
	return Batch(ctx, c.cfg, writes)
}

// Batch commits writes as one entry, all or none, on the node at cfg.URL
// with cfg's credentials (Token; ProjectID and APIKey when set).
func Batch(ctx context.Context, cfg Config, writes []Write) (*BatchResult, error) {
	body, err := json.Marshal(map[string][]Write{"writes": writes})
	if err != nil {
		return nil, fmt.Errorf("edgebase: encode batch: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(cfg.URL, "/")+"/api/db/batch", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("edgebase: batch request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+cfg.Token)
	if cfg.ProjectID != "" {
		req.Header.Set("X-Project-Id", cfg.ProjectID)
	}
	if cfg.APIKey != "" {
		req.Header.Set("X-API-Key", cfg.APIKey)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("edgebase: batch: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode == http.StatusOK {
		cfg.Session.observeHeader(resp.Header)
	}
	if resp.StatusCode != http.StatusOK {
		// Field names the refused write ("writes[3]"); nothing was written.
		return nil, httpError(resp)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("edgebase: batch: read answer: %w", err)
	}
	var out BatchResult
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("edgebase: batch: decode answer: %w", err)
	}
	cfg.Session.Observe(out.Revision)
	return &out, nil
}
