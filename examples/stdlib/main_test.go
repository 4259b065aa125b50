package main

import (
	"testing"

	"github.com/ratekeeper/ratekeeper/examples/internal/demo"
	"github.com/ratekeeper/ratekeeper/examples/internal/demotest"
)

func TestService(t *testing.T) { demotest.Run(t, demo.Routes) }
