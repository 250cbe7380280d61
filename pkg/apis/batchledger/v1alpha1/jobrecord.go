package v1alpha1

// RecordFinalizer holds a Job that a live account names until every such account has
// recorded the Job's end: its terminal condition, or, for a Job deleted before it
// terminated, what it had completed when it was deleted. A Job deleted the moment it
// finished (ttlSecondsAfterFinished: 0, a JobSet restart) while no manager was leading is
// still there, Terminating with its final status, when the next one starts. The Job and
// JobSet webhook adds it to the Jobs it stamps; the controller adds it to a named Job
// that lacks it and removes it, by a JSON patch that tests and removes only this entry,
// once holding the Job serves no purpose, and at the latest a bounded time after the
// Job's deletion started.
const RecordFinalizer = "batchledger.dev/record"
