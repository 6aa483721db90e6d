(define (problem gripper-p19)
  (:domain gripper)
  (:objects
    rooma roomb - room
    ball1 ball2 ball3 ball4 ball5 ball6 - ball
    left right - gripper
  )
  (:init
    (at-robby roomb)
    (free left)
    (free right)
    (at ball1 roomb)
    (at ball2 rooma)
    (at ball3 roomb)
    (at ball4 roomb)
    (at ball5 roomb)
    (at ball6 rooma)
  )
  (:goal (and
    (at ball3 rooma)
    (at ball4 rooma)
    (at ball6 roomb)
  )))
