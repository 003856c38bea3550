"""SurvFD and SurvSHAP-IQ (Langbein et al., ICML 2026): functional decomposition and time-indexed Shapley
interactions for survival models. See README.md in this folder."""
