"""Example jobs written only against the public ``sparkwire.spark`` API, as a team would write its own."""
