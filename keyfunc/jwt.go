package keyfunc

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Defaults of [JWTOptions].
const (
	// defaultJWTLeeway is the clock skew allowed on exp and nbf.
	defaultJWTLeeway = 30 * time.Second
	// defaultMaxTokenLength bounds the token, in bytes, before it is parsed.
	defaultMaxTokenLength = 8 << 10
)

// minRSABits is the smallest RSA modulus accepted for verification.
const minRSABits = 2048

// JWTOptions configures [JWTSubject]. Algorithms and exactly one of Key and
// Keyfunc are required; every other field has a documented zero-value
// default.
type JWTOptions struct {
	// Algorithms is the allow-list of signing algorithms, as JWS "alg"
	// names: HS256, HS384, HS512, RS256, RS384, RS512, PS256, PS384, PS512,
	// ES256, ES384, ES512, EdDSA. Required. "none" is refused. A token
	// whose header names another algorithm is invalid.
	Algorithms []string

	// Key is a static verification key: a []byte secret for HS*
	// (at least as long as the hash: 32, 48 or 64 bytes), an
	// *rsa.PublicKey of at least 2048 bits for RS* and PS*, an
	// *ecdsa.PublicKey on the curve of the algorithm (P-256 for ES256,
	// P-384 for ES384, P-521 for ES512) for ES*, or an ed25519.PublicKey
	// for EdDSA. A private key of those types is accepted and its public
	// half used. Every algorithm in Algorithms must fit the key, so that
	// an RSA public key can never be used as an HMAC secret.
	Key any

	// Keyfunc looks up the verification key of each token, for example by
	// its "kid" header, so keys can rotate. It may return a single key or
	// a jwt.VerificationKeySet. It is called only for tokens whose
	// algorithm is allowed, and the key it returns must fit that
	// algorithm's family and size as for Key; otherwise the token is
	// invalid. An error from Keyfunc makes the token invalid. It must be
	// safe for concurrent use.
	Keyfunc jwt.Keyfunc

	// Issuer, when set, must equal the token's "iss" claim.
	Issuer string

	// Audience, when set, lists accepted audiences: the token's "aud"
	// claim must contain at least one of them.
	Audience []string

	// Leeway is the clock skew allowed when checking exp and nbf. Zero
	// means 30 seconds; a negative value means none.
	Leeway time.Duration

	// ExpirationOptional accepts tokens without an "exp" claim. By default
	// such tokens are invalid, since they would identify a client forever.
	ExpirationOptional bool

	// Header names the header that carries the token. The default,
	// "Authorization", expects the Bearer scheme ("Bearer <token>", scheme
	// case-insensitive); any other header carries the bare token.
	Header string

	// Cookie, when set, reads the token from the cookie of that name
	// instead of a header (the first cookie of that name, when a browser
	// sends several). Mutually exclusive with Header.
	Cookie string

	// MaxTokenLength bounds the token length in bytes, checked before the
	// token is parsed. Zero means 8192; negative is an error.
	MaxTokenLength int

	// Now is the clock used for exp and nbf. Nil means time.Now.
	Now func() time.Time
}

type jwtKeyFunc struct {
	parser  *jwt.Parser
	algs    []string
	key     any // static key, public half; nil with lookup
	lookup  jwt.Keyfunc
	header  string // canonical; "" with cookie
	bearer  bool
	cookie  string
	maxLen  int
	algDesc string
}

// JWTSubject returns a KeyFunc whose identity is the "sub" claim of a
// verified JSON Web Token, unchanged: "alice" for a token issued to alice.
// Subjects are compared as exact bytes, without Unicode normalization.
//
// It trusts only tokens that github.com/golang-jwt/jwt/v5 verifies with an
// allowed algorithm and a key of that algorithm's family, whose exp (unless
// optional) and nbf hold with the configured leeway, and whose issuer and
// audience match when configured. It fails with an error wrapping
// [ErrNoIdentity] when the request carries no token (no Authorization
// header, a scheme other than Bearer, an empty header or cookie) and with
// one wrapping [ErrInvalidToken] (and the library's error, if any) when the
// token is too long, malformed, unverifiable, out of its validity period,
// or has no subject; ErrInvalidToken wraps ErrNoIdentity too, so the
// middleware can fall back to another key either way. It never returns a
// key for an unverified token.
//
// JWTSubject returns an error for invalid options: no algorithms, an unknown
// algorithm or "none", neither or both of Key and Keyfunc, a static key that
// does not fit every allowed algorithm, both Header and Cookie, an invalid
// header or cookie name, a negative MaxTokenLength. The KeyFunc is safe for
// concurrent use if Keyfunc and Now are.
func JWTSubject(opts JWTOptions) (KeyFunc, error) {
	j := &jwtKeyFunc{}
	if err := j.setAlgorithms(opts.Algorithms); err != nil {
		return nil, err
	}
	if err := j.setKey(opts); err != nil {
		return nil, err
	}
	if err := j.setSource(opts); err != nil {
		return nil, err
	}
	switch {
	case opts.MaxTokenLength < 0:
		return nil, fmt.Errorf("keyfunc: JWTOptions.MaxTokenLength is %d, want >= 0", opts.MaxTokenLength)
	case opts.MaxTokenLength == 0:
		j.maxLen = defaultMaxTokenLength
	default:
		j.maxLen = opts.MaxTokenLength
	}
	for i, aud := range opts.Audience {
		if aud == "" {
			return nil, fmt.Errorf("keyfunc: JWTOptions.Audience[%d] is empty", i)
		}
	}
	j.parser = jwt.NewParser(parserOptions(opts, j.algs)...)
	return j.keyFunc, nil
}

// setAlgorithms checks and sets the allow-list of algorithms.
func (j *jwtKeyFunc) setAlgorithms(algs []string) error {
	if len(algs) == 0 {
		return errors.New("keyfunc: JWTOptions.Algorithms is empty: list the accepted signing algorithms")
	}
	for i, alg := range algs {
		if algFamily(alg) == "" {
			return fmt.Errorf("keyfunc: JWTOptions.Algorithms[%d]: %q is not an accepted algorithm", i, alg)
		}
	}
	j.algs = slices.Clone(algs)
	j.algDesc = strings.Join(j.algs, ", ")
	return nil
}

// setKey checks and sets the static key or the key lookup; the algorithms
// must be set.
func (j *jwtKeyFunc) setKey(opts JWTOptions) error {
	switch {
	case opts.Key == nil && opts.Keyfunc == nil:
		return errors.New("keyfunc: JWTOptions: set Key or Keyfunc")
	case opts.Key != nil && opts.Keyfunc != nil:
		return errors.New("keyfunc: JWTOptions: set Key or Keyfunc, not both")
	case opts.Keyfunc != nil:
		j.lookup = opts.Keyfunc
		return nil
	}
	k := publicHalf(opts.Key)
	for _, alg := range j.algs {
		if err := checkKey(alg, k); err != nil {
			return fmt.Errorf("keyfunc: JWTOptions.Key: %w", err)
		}
	}
	j.key = k
	return nil
}

// setSource checks and sets where the token is read: a cookie, a header,
// or by default the Authorization header's Bearer scheme.
func (j *jwtKeyFunc) setSource(opts JWTOptions) error {
	switch {
	case opts.Header != "" && opts.Cookie != "":
		return errors.New("keyfunc: JWTOptions: set Header or Cookie, not both")
	case opts.Cookie != "":
		if !isToken(opts.Cookie) {
			return fmt.Errorf("keyfunc: JWTOptions.Cookie %q is not a valid cookie name", opts.Cookie)
		}
		j.cookie = opts.Cookie
	case opts.Header != "":
		if !isToken(opts.Header) {
			return fmt.Errorf("keyfunc: JWTOptions.Header %q is not a valid header name", opts.Header)
		}
		j.header = http.CanonicalHeaderKey(opts.Header)
		j.bearer = j.header == "Authorization"
	default:
		j.header, j.bearer = "Authorization", true
	}
	return nil
}

// parserOptions returns the options of the token parser: the allowed
// algorithms, the leeway, exp required unless optional, the clock, the
// issuer and the audience.
func parserOptions(opts JWTOptions, algs []string) []jwt.ParserOption {
	leeway := opts.Leeway
	switch {
	case leeway == 0:
		leeway = defaultJWTLeeway
	case leeway < 0:
		leeway = 0
	}
	popts := []jwt.ParserOption{
		jwt.WithValidMethods(algs),
		jwt.WithLeeway(leeway),
	}
	if !opts.ExpirationOptional {
		popts = append(popts, jwt.WithExpirationRequired())
	}
	if opts.Now != nil {
		popts = append(popts, jwt.WithTimeFunc(opts.Now))
	}
	if opts.Issuer != "" {
		popts = append(popts, jwt.WithIssuer(opts.Issuer))
	}
	if len(opts.Audience) > 0 {
		popts = append(popts, jwt.WithAudience(slices.Clone(opts.Audience)...))
	}
	return popts
}

func (j *jwtKeyFunc) keyFunc(r *http.Request) (string, error) {
	tok, err := j.token(r)
	if err != nil {
		return "", err
	}
	if len(tok) > j.maxLen {
		return "", fmt.Errorf("keyfunc: token of %d bytes exceeds %d: %w", len(tok), j.maxLen, ErrInvalidToken)
	}
	var claims jwt.RegisteredClaims
	if _, err := j.parser.ParseWithClaims(tok, &claims, j.verificationKey); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if claims.Subject == "" {
		return "", fmt.Errorf("keyfunc: token has no subject: %w", ErrInvalidToken)
	}
	return claims.Subject, nil
}

// token extracts the raw token from r.
func (j *jwtKeyFunc) token(r *http.Request) (string, error) {
	if j.cookie != "" {
		c, err := r.Cookie(j.cookie)
		if err != nil || c.Value == "" {
			return "", fmt.Errorf("keyfunc: no cookie %s: %w", j.cookie, errNoToken)
		}
		return c.Value, nil
	}
	values := r.Header.Values(j.header)
	switch len(values) {
	case 0:
		return "", fmt.Errorf("keyfunc: no %s header: %w", j.header, errNoToken)
	case 1:
	default:
		return "", fmt.Errorf("keyfunc: %s header appears %d times: %w", j.header, len(values), ErrInvalidToken)
	}
	v := strings.Trim(values[0], " \t")
	if j.bearer {
		scheme, rest, _ := strings.Cut(v, " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return "", fmt.Errorf("keyfunc: %s header has no Bearer token: %w", j.header, errNoToken)
		}
		v = strings.TrimLeft(rest, " ")
	}
	if v == "" {
		return "", fmt.Errorf("keyfunc: empty token in %s header: %w", j.header, errNoToken)
	}
	return v, nil
}

// verificationKey is the jwt.Keyfunc handed to the parser: it returns the
// static key or the looked-up key after checking that it fits the token's
// algorithm.
func (j *jwtKeyFunc) verificationKey(t *jwt.Token) (any, error) {
	alg := t.Method.Alg()
	if !slices.Contains(j.algs, alg) { // the parser checks this too
		return nil, fmt.Errorf("algorithm %q is not one of %s", alg, j.algDesc)
	}
	if j.lookup == nil {
		return j.key, nil
	}
	k, err := j.lookup(t)
	if err != nil {
		return nil, err
	}
	if set, ok := k.(jwt.VerificationKeySet); ok {
		keys := make([]jwt.VerificationKey, len(set.Keys))
		for i, k := range set.Keys {
			k = publicHalf(k)
			if err := checkKey(alg, k); err != nil {
				return nil, fmt.Errorf("key %d of the set: %w", i, err)
			}
			keys[i] = k
		}
		return jwt.VerificationKeySet{Keys: keys}, nil
	}
	k = publicHalf(k)
	if err := checkKey(alg, k); err != nil {
		return nil, err
	}
	return k, nil
}

// algFamily returns "HS", "RS", "ES" or "EdDSA" for an accepted algorithm
// name (PS* belong to "RS": same key type), and "" otherwise.
func algFamily(alg string) string {
	switch alg {
	case "HS256", "HS384", "HS512":
		return "HS"
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
		return "RS"
	case "ES256", "ES384", "ES512":
		return "ES"
	case "EdDSA":
		return "EdDSA"
	}
	return ""
}

// publicHalf returns the public key of a private key of a supported type,
// and k itself otherwise (a nil pointer too, which checkKey refuses).
func publicHalf(k any) any {
	switch k := k.(type) {
	case *rsa.PrivateKey:
		if k != nil {
			return &k.PublicKey
		}
	case *ecdsa.PrivateKey:
		if k != nil {
			return &k.PublicKey
		}
	case ed25519.PrivateKey:
		if len(k) == ed25519.PrivateKeySize {
			return k.Public()
		}
	case *ed25519.PrivateKey:
		if k != nil && len(*k) == ed25519.PrivateKeySize {
			return k.Public()
		}
	case *ed25519.PublicKey:
		if k != nil {
			return *k
		}
	}
	return k
}

// checkKey reports whether key (a public key or an HMAC secret) may verify
// tokens signed with alg.
func checkKey(alg string, key any) error {
	switch algFamily(alg) {
	case "HS":
		b, ok := key.([]byte)
		if !ok {
			return fmt.Errorf("%s needs a []byte secret, got %s", alg, keyType(key))
		}
		if want := hmacMinLen(alg); len(b) < want {
			return fmt.Errorf("%s needs a secret of at least %d bytes, got %d", alg, want, len(b))
		}
		if strings.Contains(string(b), "-----BEGIN") {
			return fmt.Errorf("%s secret looks like a PEM key; an HMAC secret must not be a public key", alg)
		}
	case "RS":
		k, ok := key.(*rsa.PublicKey)
		if !ok || k == nil || k.N == nil {
			return fmt.Errorf("%s needs an *rsa.PublicKey, got %s", alg, keyType(key))
		}
		if k.N.BitLen() < minRSABits {
			return fmt.Errorf("%s needs an RSA key of at least %d bits, got %d", alg, minRSABits, k.N.BitLen())
		}
	case "ES":
		k, ok := key.(*ecdsa.PublicKey)
		if !ok || k == nil || k.Curve == nil {
			return fmt.Errorf("%s needs an *ecdsa.PublicKey, got %s", alg, keyType(key))
		}
		if want := ecCurve(alg); k.Curve != want {
			return fmt.Errorf("%s needs a key on %s, got %s", alg, want.Params().Name, k.Curve.Params().Name)
		}
	case "EdDSA":
		k, ok := key.(ed25519.PublicKey)
		if !ok || len(k) != ed25519.PublicKeySize {
			return fmt.Errorf("%s needs an ed25519.PublicKey, got %s", alg, keyType(key))
		}
	default:
		return fmt.Errorf("%q is not an accepted algorithm", alg)
	}
	return nil
}

func hmacMinLen(alg string) int {
	switch alg {
	case "HS384":
		return 48
	case "HS512":
		return 64
	}
	return 32
}

func ecCurve(alg string) elliptic.Curve {
	switch alg {
	case "ES384":
		return elliptic.P384()
	case "ES512":
		return elliptic.P521()
	}
	return elliptic.P256()
}

func keyType(k any) string {
	if k == nil {
		return "no key"
	}
	if v := reflect.ValueOf(k); v.Kind() == reflect.Pointer && v.IsNil() {
		return fmt.Sprintf("a nil %T", k)
	}
	return fmt.Sprintf("%T", k)
}
