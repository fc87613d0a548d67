"""Fake servers for tests: they listen on a free loopback port, script their replies and record requests."""
