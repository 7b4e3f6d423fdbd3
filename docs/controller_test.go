package docs

import (
	"context"

	"github.com/ndigo/ndigo/annotations"
)

// Payroll is the controller of the bad specs below.
type Payroll struct{}

func (*Payroll) Close(context.Context) error { return nil }

// Controllers with one bad tag each.
type (
	TTLSoon struct {
		Payroll
		_ annotations.Scheduled `method:"Close" cron:"@daily" lock:"k" lockTtl:"soon"`
	}
	MisspelledKey struct {
		Payroll
		_ annotations.Scheduled `method:"Close" cron:"@daily" lock:"k" lockTTL:"5s"`
	}
	RenewYes struct {
		Payroll
		_ annotations.Scheduled `method:"Close" cron:"@daily" lock:"k" renew:"yes"`
	}
	CatchUpLater struct {
		Payroll
		_ annotations.Scheduled `method:"Close" cron:"@daily" lock:"k" catchUp:"later"`
	}
	NoMethod struct {
		Payroll
		_ annotations.Scheduled `method:"Open" cron:"@daily"`
	}
	Placeholder struct {
		Payroll
		_ annotations.Scheduled `method:"Close" cron:"${payroll.cron}"`
	}
)
