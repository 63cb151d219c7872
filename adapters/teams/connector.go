package teams

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign/bot"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// connector is the Bot Connector REST API, the one way Countersign speaks
// to Teams: each method is one HTTP call (after the access token, which
// the token source caches until it expires), and each failure is reported
// as what it means for a delivery (bot.Renderer): a 429 a
// *bot.RetryAfterError with its Retry-After, the service or the token
// endpoint unreachable, failing or refusing the credentials a
// *bot.UnavailableError, a request Teams will refuse however often it is
// made (a conversation the bot is not in, a deleted message, a card it
// rejects) a *bot.PermanentError.
type connector struct {
	base   string // the service URL, ending with '/'
	client *http.Client
	tokens oauth2.TokenSource
}

func newConnector(base, tokenURL, appID, password string, client *http.Client) *connector {
	cc := &clientcredentials.Config{ClientID: appID, ClientSecret: password, TokenURL: tokenURL, Scopes: []string{ConnectorScope}, AuthStyle: oauth2.AuthStyleInParams}
	// The token source refreshes only when the cached token expires; it
	// makes its requests with the adapter's client. It never retries.
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, client)
	return &connector{base: base, client: client, tokens: cc.TokenSource(ctx)}
}

// activity is the part of a Bot Framework activity Countersign sends or
// reads.
type activity struct {
	Type         string          `json:"type"`
	ID           string          `json:"id,omitempty"`
	Timestamp    string          `json:"timestamp,omitempty"`
	ServiceURL   string          `json:"serviceUrl,omitempty"`
	ChannelID    string          `json:"channelId,omitempty"`
	From         *account        `json:"from,omitempty"`
	Conversation *conversation   `json:"conversation,omitempty"`
	Recipient    *account        `json:"recipient,omitempty"`
	Text         string          `json:"text,omitempty"`
	TextFormat   string          `json:"textFormat,omitempty"`
	Summary      string          `json:"summary,omitempty"`
	ReplyToID    string          `json:"replyToId,omitempty"`
	Name         string          `json:"name,omitempty"`
	Value        json.RawMessage `json:"value,omitempty"`
	Attachments  []attachment    `json:"attachments,omitempty"`
	Entities     []entity        `json:"entities,omitempty"`
	ChannelData  *channelData    `json:"channelData,omitempty"`
}

type account struct {
	ID          string `json:"id"`
	Name        string `json:"name,omitempty"`
	AADObjectID string `json:"aadObjectId,omitempty"`
}

type conversation struct {
	ID               string `json:"id"`
	ConversationType string `json:"conversationType,omitempty"`
	TenantID         string `json:"tenantId,omitempty"`
	IsGroup          bool   `json:"isGroup,omitempty"`
}

type attachment struct {
	ContentType string `json:"contentType"`
	Content     any    `json:"content"`
}

type entity struct {
	Type      string   `json:"type"`
	Text      string   `json:"text,omitempty"`
	Mentioned *account `json:"mentioned,omitempty"`
}

type channelData struct {
	Tenant *struct {
		ID string `json:"id"`
	} `json:"tenant,omitempty"`
}

// cardContentType is an Adaptive Card attachment's content type.
const cardContentType = "application/vnd.microsoft.card.adaptive"

// resourceResponse is what the Bot Connector answers a send with.
type resourceResponse struct {
	ID string `json:"id"`
}

func convPath(conversationID string) string {
	return "v3/conversations/" + url.PathEscape(conversationID) + "/activities"
}

// send posts a new activity in a conversation (a channel's new thread).
func (c *connector) send(ctx context.Context, conversationID string, a activity) (string, error) {
	var out resourceResponse
	err := c.do(ctx, http.MethodPost, convPath(conversationID), a, &out)
	return out.ID, err
}

// reply posts a in the thread of activity activityID.
func (c *connector) reply(ctx context.Context, conversationID, activityID string, a activity) (string, error) {
	a.ReplyToID = activityID
	var out resourceResponse
	err := c.do(ctx, http.MethodPost, convPath(conversationID)+"/"+url.PathEscape(activityID), a, &out)
	return out.ID, err
}

// update replaces activity activityID with a.
func (c *connector) update(ctx context.Context, conversationID, activityID string, a activity) error {
	a.ID = activityID
	return c.do(ctx, http.MethodPut, convPath(conversationID)+"/"+url.PathEscape(activityID), a, nil)
}

// member looks a conversation member up by their Entra object id and
// returns their Teams user id (29:…).
func (c *connector) member(ctx context.Context, conversationID, objectID string) (string, error) {
	var out account
	path := "v3/conversations/" + url.PathEscape(conversationID) + "/members/" + url.PathEscape(objectID)
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// personal opens (or finds) the one-to-one conversation of the bot and a
// user, for an answer only they may see.
func (c *connector) personal(ctx context.Context, botID, userID, tenantID string) (string, error) {
	body := map[string]any{
		"isGroup":  false,
		"bot":      account{ID: botID},
		"members":  []account{{ID: userID}},
		"tenantId": tenantID,
	}
	if tenantID != "" {
		body["channelData"] = map[string]any{"tenant": map[string]string{"id": tenantID}}
	}
	var out struct {
		ID string `json:"id"`
	}
	if err := c.do(ctx, http.MethodPost, "v3/conversations", body, &out); err != nil {
		return "", err
	}
	if out.ID == "" {
		return "", errors.New("teams: the Bot Connector created a conversation without an id")
	}
	return out.ID, nil
}

// maxResponse bounds what is read of a Bot Connector answer.
const maxResponse = 1 << 20

// do makes one authenticated call.
func (c *connector) do(ctx context.Context, method, path string, in, out any) error {
	what := method + " " + path
	tok, err := c.tokens.Token()
	if err != nil {
		return tokenError(err)
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return &bot.PermanentError{Err: fmt.Errorf("teams: %s: encoding the request: %w", what, err)}
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return &bot.PermanentError{Err: fmt.Errorf("teams: %s: %w", what, err)}
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
	}
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err := c.client.Do(req)
	if err != nil {
		return &bot.UnavailableError{Err: fmt.Errorf("teams: %s: %w", what, err)}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if out != nil && len(bytes.TrimSpace(raw)) > 0 {
			if err := json.Unmarshal(raw, out); err != nil {
				return fmt.Errorf("teams: %s: reading the answer: %w", what, err)
			}
		}
		return nil
	}
	return statusError(what, resp, raw)
}

// apiError is the Bot Connector's error body.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// unavailableCodes are 4xx error codes that say the bot cannot deliver
// anything now rather than that this call is wrong.
var unavailableCodes = map[string]bool{"ServiceError": true, "Unauthorized": true}

// statusError classifies a failed Bot Connector call.
func statusError(what string, resp *http.Response, raw []byte) error {
	var ae apiError
	_ = json.Unmarshal(raw, &ae)
	msg := strings.TrimSpace(ae.Error.Code + " " + oneLine(ae.Error.Message, 200))
	if msg == "" {
		msg = oneLine(string(raw), 200)
	}
	err := fmt.Errorf("teams: %s: %s %s", what, resp.Status, msg)
	switch code := resp.StatusCode; {
	case code == http.StatusTooManyRequests:
		return &bot.RetryAfterError{After: retryAfter(resp.Header.Get("Retry-After")), Err: err}
	case code >= 500, code == http.StatusRequestTimeout, code == http.StatusUnauthorized, unavailableCodes[ae.Error.Code]:
		return &bot.UnavailableError{Err: err}
	case code >= 400:
		return &bot.PermanentError{Err: hint(err, ae.Error.Code, code)}
	}
	return err
}

// hint adds what to do about a permanent failure.
func hint(err error, code string, status int) error {
	switch {
	case code == "BotNotInConversationRoster":
		return fmt.Errorf("%w (add the Countersign app to the team or chat of teams.channels)", err)
	case status == http.StatusNotFound:
		return fmt.Errorf("%w (the conversation or message is gone; check teams.channels)", err)
	}
	return err
}

// retryAfter reads a Retry-After header: seconds or an HTTP date; zero
// when absent or unreadable (the outbox then backs off on its own).
func retryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// tokenError classifies a failed client-credentials request: throttled, or
// the token endpoint unreachable or refusing the app's credentials (the
// platform takes no delivery until that is fixed).
func tokenError(err error) error {
	wrapped := fmt.Errorf("teams: getting a Bot Connector token: %w", err)
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode == http.StatusTooManyRequests {
		return &bot.RetryAfterError{After: retryAfter(re.Response.Header.Get("Retry-After")), Err: wrapped}
	}
	return &bot.UnavailableError{Err: wrapped}
}

// oneLine is chat's sanitiser, for text from the platform in logs and
// errors.
func oneLine(s string, max int) string { return bot.OneLine(s, max) }
