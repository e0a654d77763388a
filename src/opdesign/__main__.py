from opdesign.cli.entry import main

if __name__ == "__main__":  # not when a spawned worker process (MCP tool calls) imports this as __mp_main__
    main()
