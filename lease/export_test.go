package lease

// DisableScriptReload makes c's lanes leave NOSCRIPT errors as they are
// (the behaviour before they reloaded the scripts), for the negative
// control of the reload.
func DisableScriptReload(c *Client) {
	for _, n := range c.nodes {
		n.noReload.Store(true)
	}
}
