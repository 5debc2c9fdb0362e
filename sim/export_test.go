package sim

// AnnotationBehavior exposes annotationBehavior to the external tests.
var AnnotationBehavior = annotationBehavior
