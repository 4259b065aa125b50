package store

// MaxParts is the most requests one stacked decision ([MultiStore]) may
// carry.
const MaxParts = 8

// MultiDecision is the answer to a stacked decision ([MultiStore]).
type MultiDecision struct {
	// Decision describes the most restrictive part, the one Part names:
	// for an admission the part with the fewest units remaining (in
	// absolute units, as between the limits of one request; ties: the
	// earliest part), for a refusal the refusing part with the longest
	// RetryAfter (ties: the earliest). Allowed is true only when every
	// part admitted the request.
	Decision
	// Part is the index in the stack of the part Decision describes.
	Part int
	// Parts holds each part's decision, in stack order. A part that
	// admits the request while another refuses it reports Allowed true
	// (it alone would admit) and its limits as they stand, without the
	// request, which was recorded in none.
	Parts []Decision
	// Refunded is how many parts recorded the request in an earlier step
	// and were given their units back because a later step refused it.
	// Only the Redis store on a Redis Cluster takes several steps.
	Refunded int
	// Unrefunded is how many parts that recorded the request could not be
	// refunded because the backend failed: their units stay charged until
	// they expire. Zero unless the backend failed during the refund.
	Unrefunded int
}
