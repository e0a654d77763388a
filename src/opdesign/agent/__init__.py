"""Agent interface: JSON tools (names, schemas, dispatch: :mod:`.tools`; shared base: :mod:`.base`;
catalog and design tools: :mod:`.catalog`, :mod:`.design`) and the MCP server over stdio (:mod:`.mcp_server`)."""
