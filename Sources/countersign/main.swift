import CountersignCommands

// The commands live in CountersignCommands, where the tests run them in-process.
await Countersign.main()
