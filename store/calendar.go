package store

import (
	"fmt"
	"time"
)

// calendarSpans are the values of [Limit.Calendar], each with the longest
// its window can last: a day of 25 hours and a week with one (the autumn
// change of daylight saving time), a month of 31 days and an hour.
var calendarSpans = map[string]time.Duration{
	"day":   25 * time.Hour,
	"week":  7*24*time.Hour + time.Hour,
	"month": 31*24*time.Hour + time.Hour,
}

// validateCalendar checks the fields of a calendar limit (Calendar or
// Location set) and returns its longest window, which stands for its
// Period in the rest of Validate's checks.
func (l Limit) validateCalendar() (time.Duration, error) {
	span, ok := calendarSpans[l.Calendar]
	switch {
	case l.Calendar == "":
		return 0, fmt.Errorf("%w: Location needs a Calendar", ErrInvalidLimit)
	case !ok:
		return 0, fmt.Errorf("%w: Calendar: unknown value %q, want \"day\", \"week\" or \"month\"", ErrInvalidLimit, l.Calendar)
	case l.Algorithm != FixedWindow:
		return 0, fmt.Errorf("%w: Calendar needs the %s algorithm, got %s", ErrInvalidLimit, FixedWindow, l.Algorithm)
	case l.Period != 0:
		return 0, fmt.Errorf("%w: Period must be 0 for a Calendar limit (the calendar sets the window), got %s", ErrInvalidLimit, l.Period)
	}
	return span, nil
}

// calendarRequest refuses the features a request with a calendar limit
// does not support: partial grants (decided on aligned windows only).
func (r Request) calendarRequest() error {
	for i, l := range r.Limits {
		if l.Calendar != "" && r.Partial {
			return fmt.Errorf("%w: limit %d: Partial is not supported with a Calendar limit", ErrInvalidRequest, i)
		}
	}
	return nil
}
