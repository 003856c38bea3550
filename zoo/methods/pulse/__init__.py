"""PuLSE: SAE features of r/ChatGPT, release-anchored trend breakpoints and anytime-valid alarms."""
