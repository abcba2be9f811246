package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/verifyd/verifyd/server/admin/adminapi"
	"github.com/verifyd/verifyd/server/receipt"
)

// maxDocBytes bounds a receipt or a key set read by receipt verify; a
// receipt is about a kilobyte.
const maxDocBytes = 1 << 20

// jwksPath is where verifyd's public API publishes its key set.
const jwksPath = "/.well-known/jwks.json"

// verifyResult is receipt verify's -json output.
type verifyResult struct {
	OK    bool   `json:"ok"`
	Kid   string `json:"kid,omitempty"`
	Error string `json:"error,omitempty"`
	// Keys says where the key set came from.
	Keys string `json:"keys"`
}

// receiptVerify checks a receipt with receipt.Verify (the signature scheme
// of server/receipt/README.md) against a key set from --jwks, --url or,
// by default, the admin socket.
func receiptVerify(c *cli, args []string) error {
	cmd := this("receipt", "verify")
	fs := c.flagSet("receipt verify")
	jwksFile := fs.String("jwks", "", "read the key set from `file` (a saved "+jwksPath+")")
	jwksURL := fs.String("url", "", "fetch the key set from `url`: https://HOST"+jwksPath+" of verifyd's public API (a bare https://HOST gets that path)")
	pos, err := c.parse(fs, cmd, args, 0, 1)
	if err != nil {
		return err
	}
	if *jwksFile != "" && *jwksURL != "" {
		return &usageError{msg: "give --jwks or --url, not both", usage: cmd.usageLine()}
	}
	data, err := c.readReceipt(cmd, pos)
	if err != nil {
		return err
	}

	var jwks []byte
	var from string
	switch {
	case *jwksFile != "":
		from = *jwksFile
		jwks, err = readFile(*jwksFile)
	case *jwksURL != "":
		var u string
		if u, err = jwksLocation(*jwksURL); err != nil {
			return &usageError{msg: err.Error(), usage: cmd.usageLine()}
		}
		from = u
		ctx, cancel := context.WithTimeout(c.ctx, c.timeout)
		defer cancel()
		jwks, err = fetch(ctx, u)
	default:
		err = c.call(func(ctx context.Context, ac *adminapi.Client) (err error) {
			jwks, _, err = ac.SigningKeys(ctx)
			return err
		})
		if c.client != nil {
			from = "admin socket " + c.client.Socket()
		}
	}
	if err != nil {
		return fmt.Errorf("cannot get the key set: %w", err)
	}

	kid, err := receipt.Verify(data, jwks)
	if errors.Is(err, receipt.ErrBadKeySet) {
		return fmt.Errorf("the key set from %s is not usable: %w", from, err)
	}
	res := verifyResult{OK: err == nil, Kid: kid, Keys: from}
	if err != nil {
		res.Error = strings.TrimPrefix(err.Error(), "receipt: ")
	}
	if c.json {
		if perr := c.printJSON(res); perr != nil {
			return perr
		}
	} else if err == nil {
		fmt.Fprintf(c.stdout, "ok: signed by kid %s\n", kid)
	} else {
		fmt.Fprintf(c.stderr, "verifyctl: receipt does not verify: %s\n", res.Error)
	}
	if err != nil {
		return failure{}
	}
	return nil
}

// readReceipt reads the receipt from the file argument, or stdin when
// there is none or it is "-".
func (c *cli) readReceipt(cmd *command, pos []string) ([]byte, error) {
	if len(pos) == 1 && pos[0] != "-" {
		return readFile(pos[0])
	}
	if f, ok := c.stdin.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			return nil, &usageError{msg: "give the receipt as FILE or on standard input", usage: cmd.usageLine()}
		}
	}
	return readLimited(c.stdin, "standard input")
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLimited(f, path)
}

func readLimited(r io.Reader, name string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxDocBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", name, err)
	}
	if len(b) > maxDocBytes {
		return nil, fmt.Errorf("%s is over %d bytes", name, maxDocBytes)
	}
	return b, nil
}

// jwksLocation checks an http(s) URL and completes a bare host with the
// key set's path.
func jwksLocation(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("--url must be an http(s) URL like https://verifyd.example%s, not %q", jwksPath, raw)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = jwksPath
	}
	return u.String(), nil
}

// fetch GETs the key set at u.
func fetch(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return readLimited(resp.Body, u)
}
