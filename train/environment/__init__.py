"""What an agent meets in an episode: the published task and its split, the tool catalog, the simulated user,
the experts, the turn parser, the reward and the episode loops. It knows nothing of training or evaluation."""
