package api

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/uptrace/bun"

	"github.com/sensordata/sensorapi/pkg/events"
	"github.com/sensordata/sensorapi/pkg/model"
	"github.com/sensordata/sensorapi/pkg/store"
)

// eventRoutes are API.md §18: events and their deliveries. Scopes: full tokens write,
// read tokens list and get (pkg/auth/scopes.go).
func (s *Server) eventRoutes(v2 *gin.RouterGroup) {
	v2.GET("/events", wrap(s.listEvents))
	v2.POST("/events", wrap(s.createEvent))
	v2.GET("/events/:event", wrap(s.getEvent))
	v2.PATCH("/events/:event", wrap(s.updateEvent(false)))
	v2.PUT("/events/:event", wrap(s.updateEvent(true)))
	v2.DELETE("/events/:event", wrap(s.deleteEvent))
	v2.GET("/events/:event/deliveries", wrap(s.listDeliveries))
}

func (s *Server) listEvents(c *gin.Context) error {
	p := store.ParseList(c.Request.URL.Query(), events.Fields, "-createdAt", "e.id")
	evs, count, err := events.List(c, s.DB, account(c).ID, p)
	if err != nil {
		return err
	}
	listPage(s, c, p, evs, count, (*events.Event).JSON)
	return nil
}

func (s *Server) getEvent(c *gin.Context) error {
	e, err := events.Find(c, s.DB, account(c).ID, c.Param("event"), false)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, e.JSON(s.baseURL(c)))
	return nil
}

// createEvent answers 201 with the event and its signing secret, shown this once.
func (s *Server) createEvent(c *gin.Context) error {
	raw, err := decodeObject(c)
	if err != nil {
		return err
	}
	secret, err := events.NewSecret()
	if err != nil {
		return err
	}
	e := &events.Event{AccountID: account(c).ID, IsActive: true, Secret: secret}
	err = s.DB.RunInTx(c, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := lockEvents(ctx, tx, e.AccountID); err != nil {
			return err
		}
		if _, err := events.Apply(ctx, tx, raw, e, true, s.Config.Events.WebhookAllowPrivate); err != nil {
			return err
		}
		if err := events.Insert(ctx, tx, e); err != nil {
			return err
		}
		var err error // read back with its state
		e, err = events.Find(ctx, tx, e.AccountID, e.PublicID, false)
		return err
	})
	if err != nil {
		return err
	}
	s.eventsChanged(c)
	r := e.JSON(s.baseURL(c))
	r.Secret = secret
	c.JSON(http.StatusCreated, r)
	return nil
}

// updateEvent is PATCH (partial) and PUT (the create fields required).
func (s *Server) updateEvent(full bool) handlerFunc {
	return func(c *gin.Context) error {
		raw, err := decodeObject(c)
		if err != nil {
			return err
		}
		var e *events.Event
		err = s.DB.RunInTx(c, nil, func(ctx context.Context, tx bun.Tx) error {
			if err := lockEvents(ctx, tx, account(c).ID); err != nil {
				return err
			}
			var err error // the transaction's own
			if e, err = events.Find(ctx, tx, account(c).ID, c.Param("event"), true); err != nil {
				return err
			}
			reset, err := events.Apply(ctx, tx, raw, e, full, s.Config.Events.WebhookAllowPrivate)
			if err != nil {
				return err
			}
			if err := events.Update(ctx, tx, e, reset); err != nil {
				return err
			}
			e, err = events.Find(ctx, tx, account(c).ID, e.PublicID, false)
			return err
		})
		if err != nil {
			return err
		}
		s.eventsChanged(c)
		c.JSON(http.StatusOK, e.JSON(s.baseURL(c)))
		return nil
	}
}

// eventsChanged tells this instance's evaluator that the request's account's events
// changed.
func (s *Server) eventsChanged(c *gin.Context) {
	if s.EventsChanged != nil {
		s.EventsChanged(c, account(c).ID)
	}
}

func (s *Server) deleteEvent(c *gin.Context) error {
	err := s.DB.RunInTx(c, nil, func(ctx context.Context, tx bun.Tx) error {
		e, err := events.Find(ctx, tx, account(c).ID, c.Param("event"), true)
		if err != nil {
			return err
		}
		return events.Delete(ctx, tx, e.ID)
	})
	if err != nil {
		return err
	}
	s.eventsChanged(c)
	c.Status(http.StatusNoContent)
	return nil
}

// lockEvents serializes the account's event writes, so that two concurrent creates
// cannot each pass the loop check with the other's half of a loop.
func lockEvents(ctx context.Context, tx bun.Tx, account int64) error {
	_, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(?, (? % 2147483647)::int)", eventsLockClass, account)
	return err
}

// eventsLockClass is the first key of the per-account advisory lock of event writes.
const eventsLockClass = 727_431_119

// delivery is a row of event_deliveries as listed.
type delivery struct {
	bun.BaseModel `bun:"table:event_deliveries,alias:dl"`

	ID          int64      `bun:"id"`
	PublicID    string     `bun:"public_id"`
	ActionIndex int        `bun:"action_index"`
	ActionType  string     `bun:"action_type"`
	Transition  string     `bun:"transition"`
	Attempt     int        `bun:"attempt"`
	Status      string     `bun:"status"`
	HTTPStatus  *int       `bun:"http_status"`
	Error       *string    `bun:"error"`
	CreatedAt   time.Time  `bun:"created_at"`
	DeliveredAt *time.Time `bun:"delivered_at"`
}

// deliveryResponse is a delivery as the API shows it.
type deliveryResponse struct {
	ID          string  `json:"id"`
	Action      string  `json:"action"`
	ActionIndex int     `json:"actionIndex"`
	Transition  string  `json:"transition"`
	Attempt     int     `json:"attempt"`
	Status      string  `json:"status"`
	HTTPStatus  *int    `json:"httpStatus"`
	Error       *string `json:"error"`
	CreatedAt   string  `json:"createdAt"`
	DeliveredAt *string `json:"deliveredAt"`
}

func (d *delivery) JSON(string) deliveryResponse {
	return deliveryResponse{ID: d.PublicID, Action: d.ActionType, ActionIndex: d.ActionIndex, Transition: d.Transition,
		Attempt: d.Attempt, Status: d.Status, HTTPStatus: d.HTTPStatus, Error: d.Error,
		CreatedAt: model.Timestamp(d.CreatedAt), DeliveredAt: model.NullableTimestamp(d.DeliveredAt)}
}

// deliveryFields are the list filters and sort keys of deliveries.
var deliveryFields = map[string]store.Field{
	"id":         {Column: "dl.public_id", Kind: store.ID},
	"status":     {Column: "dl.status", Kind: store.Text},
	"transition": {Column: "dl.transition", Kind: store.Text},
	"action":     {Column: "dl.action_type", Kind: store.Text},
	"createdAt":  {Column: "dl.created_at", Kind: store.Time, Sortable: true},
}

// listDeliveries lists an event's deliveries, newest first.
func (s *Server) listDeliveries(c *gin.Context) error {
	e, err := events.Find(c, s.DB, account(c).ID, c.Param("event"), false)
	if err != nil {
		return err
	}
	p := store.ParseList(c.Request.URL.Query(), deliveryFields, "-createdAt", "dl.id")
	ds := []delivery{}
	base := func() *bun.SelectQuery {
		return s.DB.NewSelect().TableExpr("event_deliveries AS dl").Where("dl.event_id = ?", e.ID)
	}
	full := s.DB.NewSelect().Model(&ds).Where("dl.event_id = ?", e.ID)
	n, err := store.ScanPage(c, p, base, "dl.id", full)
	if err != nil {
		return err
	}
	listPage(s, c, p, ds, n, (*delivery).JSON)
	return nil
}
