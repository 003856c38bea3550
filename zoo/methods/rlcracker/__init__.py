"""RLCracker: an RL-trained paraphraser that strips KGW and Unigram watermarks without the detector."""
