// Package declare lets package annotations, the struct-tag reader, record
// on a task what it read from the tag, without widening package
// scheduling's API. Package scheduling sets the functions in its init;
// each returns a scheduling.Option.
package declare

// Invalid returns an option recording a declaration error found before the
// task was built: option is the option's name, value its text, rule what is
// wrong. The task then fails validation with that problem listed beside any
// others, and the rules that depend on that option are not checked.
var Invalid func(option, value, rule string) any

// Origin returns an option naming the controller type and method a task
// was declared on, for messages, and the task's default name.
var Origin func(controllerType, method string) any

// From returns an option recording where the value of option came from when
// it was not written in place (a ${path} placeholder supplied it): source
// is a phrase for messages, such as "${payroll.cron}, set by env
// APP_PAYROLL_CRON". Every problem found with that option then says so.
var From func(option, source string) any
