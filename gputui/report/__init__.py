"""`gputui report`'s data and formats, with no terminal UI: `contract` lists the cluster once
into the JSON contract, `formats` prints it as JSON, TSV or a table. The command is `gputui.cli.report`."""
