package raysubmit

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// GetJSON sends GET path (relative to BaseURL, query included) with the
// client's headers, token and retry policy, and decodes a 200 JSON answer
// into out: for the dashboard's endpoints beyond the Jobs API, such as its
// node stats (/nodes?view=summary).
func (c *Client) GetJSON(ctx context.Context, path string, out any) error {
	return c.getJSON(ctx, path, out)
}

// CopyLogs writes the job's whole log to w as it arrives, through a fixed
// buffer: Logs for a log of any size.
func (c *Client) CopyLogs(ctx context.Context, id string, w io.Writer) error {
	path := "/api/jobs/" + url.PathEscape(id) + "/logs"
	req, err := c.newRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return c.redact(fmt.Errorf("get logs of job %s: %w", id, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get logs of job %s: %w", id, c.statusError(http.MethodGet, path, resp))
	}
	if err := decodeLogs(resp.Body, w); err != nil {
		return fmt.Errorf("get logs of job %s: %w", id, err)
	}
	return nil
}
