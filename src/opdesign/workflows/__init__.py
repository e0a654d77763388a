"""What the CLI and the agent both call: new (SPEC -> files), pin (a ranked candidate), sim_rank."""
